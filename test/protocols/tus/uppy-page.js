/**
 * The Uppy test page's script (bundled by esbuild): Uppy 6 with @uppy/tus, run in Chromium; the test
 * calls `globalThis.tusPage.upload` through `page.evaluate` (its request and answer: uppy.test.ts).
 * Plain JavaScript, so that the typecheck of the tests never loads Uppy's types (they pull in the DOM's).
 */
import Uppy from '@uppy/core';
import Tus from '@uppy/tus';
import { seededBytes } from '../../browser/bytes.ts';

globalThis.tusPage = {
  async upload(request) {
    const uppy = new Uppy({ autoProceed: false }).use(Tus, {
      endpoint: request.endpoint,
      headers: { Authorization: `Bearer ${request.token}` },
      chunkSize: request.chunkSize,
      retryDelays: [0, 500],
    });
    const progress = [];
    uppy.on('upload-progress', (_file, sent) => progress.push(sent.bytesUploaded ?? 0));
    uppy.setMeta({ tags: request.tags });
    const bytes = seededBytes(request.seed, request.size);
    uppy.addFile({
      name: request.name,
      type: request.type,
      data: new File([bytes], request.name, { type: request.type }),
    });
    const result = await uppy.upload();
    const done = result?.successful?.[0];
    if (!done?.uploadURL) throw new Error(`Uppy failed: ${JSON.stringify(result?.failed?.[0]?.error)}`);
    return { uploadURL: done.uploadURL, progress };
  },
};
