/**
 * The folder tree: each level is listed when it is opened (never the whole tree at once), so a
 * project with many folders opens as fast as one with few.
 */
import type { Folder } from '@coffer/client';
import type { Context } from '../../lib/context.ts';
import { h, replace, uid } from '../../lib/dom.ts';
import { describe } from '../../lib/errors.ts';
import { busy, button, confirmDialog, field, input, notice } from '../../lib/ui.ts';

/** What a tree node stands for: every file (`undefined`), the project root (`root`) or a folder. */
export interface FolderChoice {
  id: string | undefined;
  label: string;
}

export const ALL_FILES: FolderChoice = { id: undefined, label: 'All files' };
export const ROOT: FolderChoice = { id: 'root', label: 'Project root' };

export interface FolderTree {
  element: HTMLElement;
  selected(): FolderChoice;
}

interface Options {
  /** Offer "All files" above the root (the file list does; a move target does not). */
  withAll: boolean;
  initial: FolderChoice;
  onSelect(choice: FolderChoice): void;
}

export function folderTree(context: Context, projectId: string, options: Options): FolderTree {
  let selected = options.initial;
  const nodes = new Map<string, HTMLButtonElement>();
  const element = h('div', { class: 'tree' });
  const list = h('ul', { class: 'tree-level' });

  function select(choice: FolderChoice) {
    nodes.get(String(selected.id))?.classList.remove('selected');
    nodes.get(String(selected.id))?.removeAttribute('aria-current');
    selected = choice;
    nodes.get(String(choice.id))?.classList.add('selected');
    nodes.get(String(choice.id))?.setAttribute('aria-current', 'true');
    options.onSelect(choice);
  }

  function nodeButton(choice: FolderChoice, text = choice.label) {
    const node = h('button', { type: 'button', class: 'tree-node', onclick: () => select(choice) }, text);
    if (choice.id === selected.id) {
      node.classList.add('selected');
      node.setAttribute('aria-current', 'true');
    }
    nodes.set(String(choice.id), node);
    return node;
  }

  /** Lists the folders under `parentId` into `into`. */
  async function load(parentId: string | undefined, into: HTMLUListElement) {
    replace(into, h('li', { class: 'tree-note' }, 'Loading…'));
    try {
      const { items } = await context.client.folders.list(projectId, parentId ? { parent_id: parentId } : {});
      replace(into, ...items.map(folderItem));
      if (!items.length && !parentId) into.append(h('li', { class: 'tree-note' }, 'No folders yet'));
    } catch (error) {
      if (context.expired(error)) return;
      replace(into, h('li', { class: 'tree-note' }, notice('error', describe(error))));
    }
  }

  function folderItem(folder: Folder): HTMLLIElement {
    const children = h('ul', { class: 'tree-level', id: uid('folder'), hidden: true });
    let loaded = false;
    const toggle = h(
      'button',
      {
        type: 'button',
        class: 'twisty',
        'aria-expanded': 'false',
        'aria-controls': children.id,
        'aria-label': `Open ${folder.name}`,
        onclick: () => {
          const open = children.hidden;
          children.hidden = !open;
          toggle.setAttribute('aria-expanded', String(open));
          toggle.setAttribute('aria-label', `${open ? 'Close' : 'Open'} ${folder.name}`);
          if (open && !loaded) {
            loaded = true;
            void load(folder.id, children);
          }
        },
      },
      '▸',
    );
    return h(
      'li',
      null,
      h(
        'div',
        { class: 'tree-row' },
        toggle,
        nodeButton({ id: folder.id, label: folder.path || folder.name }, folder.name),
      ),
      children,
    );
  }

  const status = h('div', { class: 'tree-status' });
  const create = button('New folder', () => void newFolder(), 'quiet small');

  /** Asks for a name and creates the folder under the selected one (at the root otherwise). */
  async function newFolder() {
    const parent = selected.id && selected.id !== 'root' ? selected : undefined;
    const name = field('Name', input({ autocomplete: 'off', required: true }));
    const confirmed = await confirmDialog({
      title: parent ? `New folder in ${parent.label}` : 'New folder at the project root',
      body: name.element,
      confirm: 'Create',
    });
    if (!confirmed || !name.control.value.trim()) return;
    try {
      await busy(create, () =>
        context.client.folders.create(projectId, {
          name: name.control.value.trim(),
          ...(parent?.id ? { parent_id: parent.id } : {}),
        }),
      );
      void reload();
    } catch (error) {
      if (context.expired(error)) return;
      status.replaceChildren(notice('error', describe(error)));
    }
  }

  async function reload() {
    status.replaceChildren();
    const fixed = [options.withAll ? ALL_FILES : undefined, ROOT].filter((c) => c !== undefined);
    const subfolders = h('ul', { class: 'tree-level' });
    replace(list, ...fixed.map((choice) => h('li', null, nodeButton(choice))), h('li', null, subfolders));
    await load(undefined, subfolders);
  }

  replace(element, h('nav', { 'aria-label': 'Folders' }, list), status, create);
  void reload();
  return { element, selected: () => selected };
}

/** A dialog to choose where a file goes; answers the folder id, null for the root, undefined when cancelled. */
export async function pickFolder(
  context: Context,
  projectId: string,
  filename: string,
): Promise<string | null | undefined> {
  let choice: FolderChoice = ROOT;
  const tree = folderTree(context, projectId, {
    withAll: false,
    initial: ROOT,
    onSelect: (picked) => {
      choice = picked;
    },
  });
  const confirmed = await confirmDialog({
    title: `Move ${filename}`,
    body: [h('p', null, 'Choose the folder it goes to.'), tree.element],
    confirm: 'Move here',
  });
  if (!confirmed) return undefined;
  return choice.id === 'root' || choice.id === undefined ? null : choice.id;
}
