/** The filters of the file list: search on names (`q`), status, category, tags, dates and sizes. */
import type { FileCategory, FileStatus, ListFilesQuery } from '@coffer/client';
import { debounce, h } from '../../lib/dom.ts';
import { endOfDay, listOf, parseSize, startOfDay } from '../../lib/format.ts';
import { button, field, input, select } from '../../lib/ui.ts';

export type FileFilters = Pick<
  ListFilesQuery,
  'q' | 'status' | 'category' | 'tags' | 'date_from' | 'date_to' | 'size_min' | 'size_max'
>;

export const STATUSES = [
  'uploading',
  'processing',
  'ready',
  'failed',
  'quarantined',
] as const satisfies readonly FileStatus[];
const CATEGORIES = [
  'image',
  'video',
  'audio',
  'document',
  'archive',
  'other',
] as const satisfies readonly FileCategory[];

const capital = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);
const SIZE_HINT = 'Write a size such as 500 KB, 10 MB or 2 GB.';

export interface FilterBar {
  element: HTMLElement;
  /** Empties every filter (and tells the list). */
  clear(): void;
  /** Whether any filter is set. */
  active(): boolean;
}

export function filterBar(changed: (filters: FileFilters) => void): FilterBar {
  const search = input({ type: 'search', placeholder: 'Search file names', autocomplete: 'off' });
  search.setAttribute('aria-label', 'Search file names');
  const status = field('Status', select([['', 'Any'], ...STATUSES.map((s) => [s, capital(s)] as const)]));
  const category = field(
    'Category',
    select([['', 'Any'], ...CATEGORIES.map((c) => [c, capital(c)] as const)]),
  );
  const tags = field('Tags', input({ placeholder: 'all of: a, b', autocomplete: 'off' }));
  const from = field('From', input({ type: 'date' }));
  const to = field('To', input({ type: 'date' }));
  const sizeMin = field('Min size', input({ placeholder: 'e.g. 1 MB', autocomplete: 'off', size: 8 }));
  const sizeMax = field('Max size', input({ placeholder: 'e.g. 1 GB', autocomplete: 'off', size: 8 }));
  const fields = [status, category, tags, from, to, sizeMin, sizeMax];

  let last = '{}';
  let current: FileFilters = {};
  /** The filters as written, or undefined (with the fields at fault marked) while one cannot be read. */
  function read(): FileFilters | undefined {
    for (const each of fields) each.setError(undefined);
    const min = parseSize(sizeMin.control.value);
    const max = parseSize(sizeMax.control.value);
    let valid = true;
    if (Number.isNaN(min)) {
      sizeMin.setError(SIZE_HINT);
      valid = false;
    }
    if (Number.isNaN(max)) {
      sizeMax.setError(SIZE_HINT);
      valid = false;
    } else if (min !== undefined && max !== undefined && max < min) {
      sizeMax.setError('The maximum is below the minimum.');
      valid = false;
    }
    if (from.control.value && to.control.value && to.control.value < from.control.value) {
      to.setError('This day is before the first one.');
      valid = false;
    }
    if (!valid) return undefined;
    const tagList = listOf(tags.control.value);
    return {
      q: search.value.trim() || undefined,
      status: (status.control.value || undefined) as FileStatus | undefined,
      category: (category.control.value || undefined) as FileCategory | undefined,
      tags: tagList.length ? tagList : undefined,
      date_from: from.control.value ? startOfDay(from.control.value) : undefined,
      date_to: to.control.value ? endOfDay(to.control.value) : undefined,
      size_min: min,
      size_max: max,
    };
  }

  function apply() {
    const filters = read();
    if (!filters) return;
    const key = JSON.stringify(filters);
    if (key === last) return;
    last = key;
    current = filters;
    changed(filters);
  }
  const typed = debounce(apply, 300);
  search.addEventListener('input', typed);
  tags.control.addEventListener('input', typed);
  for (const each of [sizeMin, sizeMax]) each.control.addEventListener('input', typed);
  for (const each of [status, category, from, to]) each.control.addEventListener('change', apply);

  const clearButton = button('Clear filters', () => bar.clear(), 'quiet');
  const element = h(
    'form',
    {
      class: 'filters',
      role: 'search',
      'aria-label': 'Filter files',
      onsubmit: (event: SubmitEvent) => {
        event.preventDefault();
        apply();
      },
    },
    h('div', { class: 'field search' }, search),
    ...fields.map((each) => each.element),
    h('div', { class: 'field' }, clearButton),
  );

  const bar: FilterBar = {
    element,
    clear() {
      search.value = '';
      for (const each of fields) each.control.value = '';
      apply();
    },
    active: () => Object.values(current).some((value) => value !== undefined),
  };
  return bar;
}
