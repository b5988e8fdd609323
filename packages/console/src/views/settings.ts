/**
 * Project settings: every setting the project has (those the console does not know are shown by
 * the type of their value), checked as typed and again by the API, whose refusal lands on the
 * field it names. Below: the metadata schema and upload tokens.
 */
import type { Project } from '@coffer/client';
import type { Context, Route, View } from '../lib/context.ts';
import { h, replace } from '../lib/dom.ts';
import { describe, fieldOf } from '../lib/errors.ts';
import { bytes, listOf, parseSize } from '../lib/format.ts';
import { busy, type Field, field, input, notice, noticeArea, section } from '../lib/ui.ts';
import { metadataSchemaSection } from './settings/metadata-schema.ts';
import { uploadTokensSection } from './settings/upload-tokens.ts';

type Kind = 'text' | 'bytes' | 'integer' | 'boolean' | 'list' | 'json';

interface Setting {
  label: string;
  kind: Kind;
  hint?: string;
  /** Empty means null (no limit, no list). */
  nullable?: boolean;
  min?: number;
  max?: number;
}

const KNOWN: Record<string, Setting> = {
  allowed_mime_types: {
    label: 'Allowed MIME types',
    kind: 'text',
    nullable: true,
    hint: 'Comma-separated; wildcards such as image/* are allowed. Empty: any type.',
  },
  max_file_size_bytes: {
    label: 'Largest file',
    kind: 'bytes',
    nullable: true,
    min: 1,
    hint: 'Bytes, or a size such as 50 MB. Empty: no project limit.',
  },
  signed_url_ttl_seconds: {
    label: 'Download URL lifetime (seconds)',
    kind: 'integer',
    min: 60,
    max: 86_400,
    hint: 'From 60 to 86400; the default lifetime of presigned download URLs.',
  },
  require_signed_urls: {
    label: 'Fixed URL lifetime',
    kind: 'boolean',
    hint: 'Callers cannot choose another lifetime for download URLs.',
  },
  virus_scan_enabled: {
    label: 'Scan uploads for viruses',
    kind: 'boolean',
    hint: 'Uploads stay processing until scanned; infected ones are quarantined.',
  },
  versioning_enabled: {
    label: 'Keep versions',
    kind: 'boolean',
    hint: 'Every new upload of a file is a version.',
  },
  enforce_schema: {
    label: 'Enforce the metadata schema',
    kind: 'boolean',
    hint: 'Metadata writes that break the active schema are refused.',
  },
  ip_allowlist: {
    label: 'IP allowlist',
    kind: 'list',
    nullable: true,
    hint: 'One CIDR per line (IPv4 or IPv6). Empty: every address. The admin key is never blocked.',
  },
  max_storage_bytes: {
    label: 'Storage quota',
    kind: 'bytes',
    nullable: true,
    min: 0,
    hint: 'Bytes, or a size such as 10 GB. Empty: no quota.',
  },
  max_files: { label: 'File quota', kind: 'integer', nullable: true, min: 0, hint: 'Empty: no quota.' },
};

/** How an unknown setting is shown: by the type of its value. */
function guess(name: string, value: unknown): Setting {
  const words = name.replaceAll('_', ' ');
  const label = words.charAt(0).toUpperCase() + words.slice(1);
  if (typeof value === 'boolean') return { label, kind: 'boolean' };
  if (typeof value === 'number' || value === null) return { label, kind: 'integer', nullable: true };
  if (typeof value === 'string') return { label, kind: 'text' };
  if (Array.isArray(value)) return { label, kind: 'list', nullable: true, hint: 'One entry per line.' };
  return { label, kind: 'json', hint: 'JSON.' };
}

interface SettingField {
  name: string;
  field: Field;
  /** The value typed, or an Error saying why it cannot be taken. */
  read(): unknown;
  initial: unknown;
}

function settingField(name: string, setting: Setting, value: unknown): SettingField {
  const initial = value;
  if (setting.kind === 'boolean') {
    const control = input({ type: 'checkbox', checked: value === true });
    return { name, initial, field: field(setting.label, control, setting.hint), read: () => control.checked };
  }
  if (setting.kind === 'list' || setting.kind === 'json') {
    const control = h('textarea', { rows: 3, spellcheck: false, class: 'code' });
    control.value =
      setting.kind === 'list'
        ? ((value as string[] | null) ?? []).join('\n')
        : JSON.stringify(value, null, 2);
    const read = () => {
      if (setting.kind === 'json') {
        try {
          return JSON.parse(control.value);
        } catch {
          return new Error('This is not valid JSON.');
        }
      }
      const items = listOf(control.value);
      return items.length || !setting.nullable ? items : null;
    };
    return { name, initial, field: field(setting.label, control, setting.hint), read };
  }
  const control = input({
    value: value === null || value === undefined ? '' : String(value),
    autocomplete: 'off',
  });
  if (setting.kind !== 'text') control.inputMode = 'numeric';
  const hint =
    setting.kind === 'bytes' && typeof value === 'number'
      ? `${setting.hint} Now ${bytes(value)}.`
      : setting.hint;
  const read = () => {
    const text = control.value.trim();
    if (text === '') return setting.nullable ? null : new Error('A value is needed.');
    if (setting.kind === 'text') return text;
    const number = setting.kind === 'bytes' ? parseSize(text) : Number(text);
    if (number === undefined || !Number.isSafeInteger(number))
      return new Error(
        setting.kind === 'bytes' ? 'Write bytes or a size such as 50 MB.' : 'Write a whole number.',
      );
    if (setting.min !== undefined && number < setting.min) return new Error(`At least ${setting.min}.`);
    if (setting.max !== undefined && number > setting.max) return new Error(`At most ${setting.max}.`);
    return number;
  };
  return { name, initial, field: field(setting.label, control, hint), read };
}

export function settingsView(context: Context, route: Route): View {
  const projectId = route.projectId!;
  const { client } = context;
  const notices = noticeArea();
  const formHolder = h('div', null, h('p', { class: 'muted' }, 'Loading…'));

  function settingsForm(project: Project) {
    const name = field('Project name', input({ value: project.name, required: true, maxLength: 200 }));
    const settings = project.settings as unknown as Record<string, unknown>;
    const fields = Object.entries(settings).map(([key, value]) =>
      settingField(key, KNOWN[key] ?? guess(key, value), value),
    );
    const save = h('button', { type: 'submit', class: 'button primary' }, 'Save settings');
    return h(
      'form',
      {
        novalidate: true,
        class: 'settings-form',
        onsubmit: async (event: SubmitEvent) => {
          event.preventDefault();
          notices.clear();
          name.setError(undefined);
          const changes: Record<string, unknown> = {};
          let valid = true;
          for (const each of fields) {
            each.field.setError(undefined);
            const value = each.read();
            if (value instanceof Error) {
              each.field.setError(value.message);
              valid = false;
            } else if (JSON.stringify(value) !== JSON.stringify(each.initial)) changes[each.name] = value;
          }
          const newName = name.control.value.trim();
          if (!newName) {
            name.setError('A project needs a name.');
            valid = false;
          }
          if (!valid) {
            notices.show('error', 'Some values cannot be saved: see the fields marked.');
            return;
          }
          try {
            const updated = await busy(save, () =>
              client.projects.update(projectId, {
                ...(newName !== project.name ? { name: newName } : {}),
                ...(Object.keys(changes).length ? { settings: changes } : {}),
              }),
            );
            replace(formHolder, settingsForm(updated));
            notices.show('success', 'Settings saved.');
          } catch (error) {
            if (context.expired(error)) return;
            const at = fieldOf(error);
            const target =
              at === 'name'
                ? name
                : fields.find((each) => at === `settings.${each.name}` || at === each.name)?.field;
            if (target) {
              target.setError(describe(error));
              target.control.focus();
            } else notices.error(error);
          }
        },
      },
      name.element,
      h('div', { class: 'form-grid' }, ...fields.map((each) => each.field.element)),
      h('div', { class: 'actions' }, save),
    );
  }

  client.projects.get(projectId).then(
    (project) => replace(formHolder, settingsForm(project)),
    (error: unknown) => {
      if (!context.expired(error)) replace(formHolder, notice('error', describe(error)));
    },
  );

  const element = h(
    'div',
    { class: 'page' },
    h('h1', null, 'Settings'),
    section('Project', notices.element, formHolder),
    metadataSchemaSection(context, projectId),
    uploadTokensSection(context, projectId),
  );
  return { element };
}
