/**
 * Type plumbing over the generated `paths`: which paths and methods exist, and the JSON that each
 * operation takes (path, query, body) and answers.
 */
import type { paths } from './schema.js';

export type Method = 'get' | 'put' | 'post' | 'patch' | 'delete';
export type Path = keyof paths;
/** The methods that `P` has. */
export type MethodOf<P extends Path> = {
  [M in Method]: paths[P][M] extends { responses: object } ? M : never;
}[Method];
export type Operation<P extends Path, M extends MethodOf<P>> = NonNullable<paths[P][M]>;

type Json<T> = T extends { content: { 'application/json': infer Body } } ? Body : undefined;
type Success<R> = R[Extract<keyof R, 200 | 201 | 202 | 204>];

/** The JSON of the operation's success answer (undefined for 204). */
export type ResponseOf<P extends Path, M extends MethodOf<P>> =
  Operation<P, M> extends { responses: infer R } ? Json<Success<R>> : never;
/** The operation's JSON request body. */
export type BodyOf<P extends Path, M extends MethodOf<P>> =
  Operation<P, M> extends { requestBody?: infer B } ? Json<NonNullable<B>> : undefined;
/** The operation's query parameters. */
export type QueryOf<P extends Path, M extends MethodOf<P>> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
/** The operation's path parameters. */
export type ParamsOf<P extends Path, M extends MethodOf<P>> =
  Operation<P, M> extends { parameters: { path?: infer A } } ? NonNullable<A> : never;
