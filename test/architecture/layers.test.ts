import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '../../src');

/** Every TypeScript file under `folder`, relative to src/. */
function filesUnder(folder: string): string[] {
  return readdirSync(join(SRC, folder), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(folder, name));
}

/** The specifiers a file imports from (type-only imports and re-exports included). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(SRC, file), 'utf8');
  return [...text.matchAll(/^(?:import|export)\b[^;]*?from\s+'([^']+)'/gms)].map((match) => match[1]!);
}

/** The files of `folder` that import something under src/`target` (or the package `target`). */
function importing(folder: string, target: string, except: (file: string) => boolean = () => false) {
  return filesUnder(folder)
    .filter((file) => !except(file))
    .filter((file) =>
      importsOf(file).some((specifier) =>
        specifier.startsWith('.')
          ? relative(SRC, join(SRC, file, '..', specifier)).startsWith(`${target}/`)
          : specifier === target || specifier.startsWith(`${target}/`),
      ),
    );
}

it('keeps HTTP out of the domain: modules import src/http only from their routes and route schemas', () => {
  const edge = (file: string) => /\/(routes|schemas)\.ts$/.test(file);
  expect(importing('modules', 'http', edge)).toEqual([]);
  expect(importing('domain', 'http')).toEqual([]);
  expect(importing('domain', 'fastify')).toEqual([]);
});

it('keeps infrastructure below the domain: infra imports neither Fastify, the HTTP edge nor the error catalogue', () => {
  expect(importing('infra', 'http')).toEqual([]);
  expect(importing('infra', 'domain')).toEqual([]);
  expect(importing('infra', 'modules')).toEqual([]);
  expect(importing('infra', 'fastify')).toEqual([]);
});
