/** Upload tokens: what a browser uploads with in place of an API key, within the constraints given here. */
import type { UploadTokenRequest } from '@coffer/client';
import type { Context } from '../../lib/context.ts';
import { h, replace } from '../../lib/dom.ts';
import { describe, fieldOf } from '../../lib/errors.ts';
import { bytes, listOf, parseSize, when } from '../../lib/format.ts';
import { busy, type Field, field, input, noticeArea, secretBox, section } from '../../lib/ui.ts';

export function uploadTokensSection(context: Context, projectId: string): HTMLElement {
  const notices = noticeArea();
  const created = h('div');
  const fields = {
    max_size: field('Largest file', input({ placeholder: '100 MB' }), 'Empty: 100 MB, or the project limit.'),
    allowed_mime_types: field(
      'Allowed types',
      input({ placeholder: 'image/*, application/pdf' }),
      'Comma-separated. Empty: the project list, else any type.',
    ),
    max_files: field(
      'Files',
      input({ inputMode: 'numeric', placeholder: '10' }),
      'How many files it may upload. Empty: 10.',
    ),
    folder_path: field(
      'Folder',
      input({ placeholder: 'users/42/avatars' }),
      'Uploads land there (created when missing).',
    ),
    tags: field('Tags', input({ placeholder: 'from-browser' }), 'Comma-separated; added to every upload.'),
    owner_user_id: field('Owner user', input(), 'Stamped on every file uploaded with it.'),
    expires_in: field(
      'Lifetime (seconds)',
      input({ inputMode: 'numeric', placeholder: '3600' }),
      'From 60 to 86400. Empty: 3600.',
    ),
  } satisfies Partial<Record<keyof UploadTokenRequest, Field>>;

  /** The request as typed, or undefined after marking the fields that cannot be read. */
  function request(): UploadTokenRequest | undefined {
    const body: UploadTokenRequest = {};
    let valid = true;
    const fail = (at: Field, message: string) => {
      at.setError(message);
      valid = false;
    };
    for (const each of Object.values(fields)) each.setError(undefined);
    const text = (at: Field) => at.control.value.trim();
    const size = parseSize(text(fields.max_size));
    if (Number.isNaN(size)) fail(fields.max_size, 'Write a size such as 10 MB.');
    else if (size !== undefined) body.max_size = size;
    const types = listOf(text(fields.allowed_mime_types));
    if (types.length) body.allowed_mime_types = types;
    for (const name of ['max_files', 'expires_in'] as const) {
      const value = text(fields[name]);
      if (!value) continue;
      if (!/^\d+$/.test(value)) fail(fields[name], 'Write a whole number.');
      else body[name] = Number(value);
    }
    if (text(fields.folder_path)) body.folder_path = text(fields.folder_path);
    const tags = listOf(text(fields.tags));
    if (tags.length) body.tags = tags;
    if (text(fields.owner_user_id)) body.owner_user_id = text(fields.owner_user_id);
    return valid ? body : undefined;
  }

  const submit = h('button', { type: 'submit', class: 'button primary' }, 'Create upload token');
  const form = h(
    'form',
    {
      novalidate: true,
      onsubmit: async (event: SubmitEvent) => {
        event.preventDefault();
        notices.clear();
        created.replaceChildren();
        const body = request();
        if (!body) return;
        try {
          const token = await busy(submit, () => context.client.uploadTokens.create(projectId, body));
          const { constraints } = token;
          replace(
            created,
            secretBox(
              'Upload token',
              token.token,
              `Expires ${when(token.expires_at)}. Up to ${constraints.max_files} files of at most ${bytes(constraints.max_size)}, types ${constraints.allowed_mime_types.join(', ')}. Shown only this once.`,
            ),
          );
        } catch (error) {
          if (context.expired(error)) return;
          const at = fieldOf(error);
          const target = at && at in fields ? fields[at as keyof typeof fields] : undefined;
          if (target) target.setError(describe(error));
          else notices.error(error);
        }
      },
    },
    h(
      'p',
      { class: 'muted' },
      'A token lets a browser upload to this project without an API key, within the limits set here.',
    ),
    h('div', { class: 'form-grid' }, ...Object.values(fields).map((each) => each.element)),
    notices.element,
    h('div', { class: 'actions' }, submit),
    created,
  );
  return section('Upload tokens', form);
}
