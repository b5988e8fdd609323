/**
 * Building the DOM. Text always goes in as text nodes (or `textContent`): nothing a user, a file
 * name or a metadata value holds is ever parsed as HTML. No HTML-writing property is reachable here.
 */

export type Child = Node | string | number | null | undefined | false | readonly Child[];
export type Props = Record<string, unknown>;

const HTML_SINKS = new Set(['innerHTML', 'outerHTML', 'srcdoc']);

function append(parent: Node, child: Child): void {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const item of child) append(parent, item);
  } else if (child instanceof Node) {
    parent.appendChild(child);
  } else {
    parent.appendChild(document.createTextNode(String(child)));
  }
}

/**
 * `h('button', { class: 'primary', onclick: save }, 'Save')`. Props: `on…` functions become
 * listeners; `class`, `for`, `aria-*`, `data-*` and `role` are attributes; other names that the
 * element has as properties (value, checked, disabled, hidden, type…) are set as properties; true
 * and false toggle an attribute; null and undefined leave it out.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props?: Props | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined) continue;
    if (HTML_SINKS.has(name)) throw new Error(`${name} is not allowed`);
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value as EventListener);
    } else if (name === 'class' || name === 'for' || name === 'role' || name.includes('-')) {
      if (value !== false) element.setAttribute(name, value === true ? '' : String(value));
    } else if (name in element) {
      (element as unknown as Record<string, unknown>)[name] = value;
    } else if (value !== false) {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  for (const child of children) append(element, child);
  return element;
}

/** Replaces what `parent` holds. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  for (const child of children) append(parent, child);
}

let nextId = 0;
/** A document-unique id, to tie a label or a message to its field. */
export const uid = (prefix: string) => `${prefix}-${++nextId}`;

/** Calls `run` once typing paused for `ms`. */
export function debounce<A extends unknown[]>(run: (...args: A) => void, ms: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return (...args: A) => {
    clearTimeout(timer);
    timer = setTimeout(() => run(...args), ms);
  };
}
