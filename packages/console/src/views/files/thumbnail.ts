/**
 * The small image beside a file's name in the list: a rendition (cropped square, the format the
 * browser takes best), asked for only once its row comes into view.
 */
import type { FileObject } from '@coffer/client';
import type { Context } from '../../lib/context.ts';
import { h } from '../../lib/dom.ts';

/** Twice the displayed size, for sharp thumbnails on high-density screens. */
const SIDE = 80;
/** As long as a page of the list stays open, give or take. */
const URL_TTL_SECONDS = 3600;

/** Ready images the server renders (SVG is not rendered). */
export const hasThumbnail = (file: FileObject) =>
  file.status === 'ready' && file.content_type.startsWith('image/') && !file.content_type.includes('svg');

export function thumbnail(context: Context, projectId: string, file: FileObject): HTMLElement {
  const frame = h('span', { class: 'thumb', 'aria-hidden': 'true' });
  if (!hasThumbnail(file)) return frame;
  const rendition = { width: SIDE, height: SIDE, fit: 'cover' } as const;
  const observer = new IntersectionObserver((entries) => {
    if (!entries.some((entry) => entry.isIntersecting)) return;
    observer.disconnect();
    context.client.files.downloadUrl(projectId, file.id, { ttl: URL_TTL_SECONDS, rendition }).then(
      ({ url }) => {
        const image = h('img', { alt: '', decoding: 'async' });
        image.addEventListener('error', () => image.remove());
        image.src = url;
        frame.append(image);
      },
      () => undefined, // no thumbnail: the name says enough
    );
  });
  observer.observe(frame);
  return frame;
}
