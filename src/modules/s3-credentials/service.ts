import { randomBytes, randomInt } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { notFound, unauthenticated, validationError, wrongCredentialKind } from '../../domain/errors.ts';
import type { Caller, Principal } from '../../domain/principal.ts';
import type { Cache } from '../../infra/cache.ts';
import { evict, readThrough } from '../../infra/cached.ts';
import type { Db } from '../../infra/db.ts';
import { hmac, seal, subkey, unseal } from '../../lib/encryption.ts';
import { newId } from '../../lib/ids.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { recordAudit } from '../audit/service.ts';
import type { FileRow } from '../files/repo.ts';
import type { FolderService } from '../folders/service.ts';
import type { Project } from '../projects/schemas.ts';
import type { ProjectService } from '../projects/service.ts';
import type { UploadTokenService } from '../uploads/tokens.ts';
import * as repo from './repo.ts';
import {
  type CreatedS3Credential,
  type S3Credential,
  type S3Scope,
  TEMPORARY_DEFAULT_SECONDS,
  type TemporaryS3Credentials,
} from './schemas.ts';

/** Long-lived access key ids start with CFR, temporary ones with CFT; 20 characters in all, as AWS's. */
export const LONG_LIVED_PREFIX = 'CFR';
export const TEMPORARY_PREFIX = 'CFT';
const LONG_LIVED_ID = /^CFR[A-Z0-9]{17}$/;
const TEMPORARY_ID = /^CFT[A-Z0-9]{17}$/;
const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
/** 30 bytes: 40 characters of base64url, the length of an AWS secret access key. */
const SECRET_BYTES = 30;
const CREDENTIAL_TTL_SECONDS = 60;
/** Envelope contexts: a sealed value made for one use never opens as another. */
const SESSION_CONTEXT = 's3-session-token';
const atRestContext = (accessKeyId: string) => `s3-credential:${accessKeyId}`;

const credentialCacheKey = (accessKeyId: string) => `s3cred:${accessKeyId}`;
/** Opened secrets kept in process memory, the least recently used dropped past it. */
const OPENED_SECRETS_KEPT = 10_000;

function accessKeyId(prefix: string): string {
  let id = prefix;
  while (id.length < 20) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return id;
}

/** What a session token carries: who the temporary credential acts as, on which project, until when. */
interface Session {
  /** The temporary access key id it was issued with. */
  a: string;
  k: 'upload_token' | 'api_key';
  /** The upload token's or API key's id. */
  i: string;
  p: string;
  /** Expiration, in seconds since the epoch. */
  e: number;
}

function parseSession(bytes: Buffer): Session | undefined {
  try {
    const session = JSON.parse(bytes.toString('utf8')) as Session;
    const valid =
      typeof session.a === 'string' &&
      (session.k === 'upload_token' || session.k === 'api_key') &&
      typeof session.i === 'string' &&
      typeof session.p === 'string' &&
      Number.isSafeInteger(session.e);
    return valid ? session : undefined;
  } catch {
    return undefined;
  }
}

/** What the SigV4 verifier needs of an access key: the secret to check with, and whom it speaks for. */
export interface ResolvedS3Credential {
  secretAccessKey: string;
  principal: Principal;
  project: Project;
  /** The newest file S3 shows at the key asked for, when it came with the credential (not cached). */
  atKey?: { file: FileRow | undefined };
}

export interface S3CredentialDeps {
  db: Db;
  /** The lookup cache: shared, or in process memory only where one process serves (see services.ts). */
  cache: Cache;
  projects: ProjectService;
  tokens: UploadTokenService;
  folders: FolderService;
  /** The server key (COFFER_SECRET_KEY or the embedded data dir's secret.key). */
  secretKey: Buffer;
  publicUrl: string;
  region: string;
  logger: Logger;
}

/**
 * S3 credentials. Long-lived ones are rows whose secret is sealed under the server key. Temporary ones
 * are stored nowhere: the session token is sealed under the server key and names the upload token or
 * API key they act as, and the secret is derived from the access key id, so any node holding the key
 * can check them; the token or key is read afresh on each use, so its expiry or revocation holds at once.
 */
export function createS3CredentialService(deps: S3CredentialDeps) {
  const { db, cache, projects, tokens, folders, logger } = deps;
  const atRestKey = subkey(deps.secretKey, 's3-secret-at-rest');
  const sessionKey = subkey(deps.secretKey, 's3-session-token');
  const derivationKey = subkey(deps.secretKey, 's3-temporary-secret');
  const endpoint = `${deps.publicUrl}/s3`;
  const unreadable = new Set<string>();
  // Secrets opened (AES-GCM) once per sealed value rather than on every request: keyed by the sealed
  // secret the credential lookup answered, so a rotated secret is opened anew and a revoked credential,
  // which the lookup no longer answers, is never looked for here.
  const opened = new LRUCache<string, string>({ max: OPENED_SECRETS_KEPT });
  function openSecret(id: string, sealed: string): string | undefined {
    // With its access key id, as the seal is bound to it.
    const key = `${id}\n${sealed}`;
    const known = opened.get(key);
    if (known !== undefined) return known;
    const secret = unseal(atRestKey, sealed, atRestContext(id))?.toString('utf8');
    if (secret !== undefined) opened.set(key, secret);
    return secret;
  }

  const derivedSecret = (id: string) =>
    hmac(derivationKey, id).subarray(0, SECRET_BYTES).toString('base64url');

  async function resolveLongLived(id: string, key?: string): Promise<ResolvedS3Credential | undefined> {
    // Where neither is cached (PostgreSQL without Redis reads both for every request), the credential
    // and its project come in one round trip, with the file at `key`, and are cached as their own
    // lookups would cache them.
    let joined: Awaited<ReturnType<typeof repo.findActiveCredentialWithProject>>;
    const credential = await readThrough(cache, credentialCacheKey(id), CREDENTIAL_TTL_SECONDS, async () => {
      joined = await repo.findActiveCredentialWithProject(db, id, key);
      if (!joined) return undefined;
      await projects.rememberProject(joined.project);
      return joined.credential;
    });
    if (!credential) return undefined;
    const secret = openSecret(id, credential.secretSealed);
    if (secret === undefined) {
      // Sealed under another server key: COFFER_SECRET_KEY (or secret.key) is not the one it was made with.
      if (!unreadable.has(id) && unreadable.size < 1000) {
        unreadable.add(id);
        logger.warn(
          { access_key_id: id },
          'an S3 credential cannot be opened with this server key: is COFFER_SECRET_KEY (or secret.key) the one it was created under?',
        );
      }
      return undefined;
    }
    const project = joined?.project ?? (await projects.getProject(credential.projectId));
    if (!project) return undefined;
    return {
      secretAccessKey: secret,
      principal: {
        kind: 's3_credential',
        credentialId: credential.id,
        projectId: credential.projectId,
        scopes: credential.scopes,
      },
      project,
      ...(joined?.atKey ? { atKey: joined.atKey } : {}),
    };
  }

  async function resolveTemporary(
    id: string,
    sessionToken: string,
  ): Promise<ResolvedS3Credential | 'expired' | undefined> {
    const opened = unseal(sessionKey, sessionToken, SESSION_CONTEXT);
    const session = opened && parseSession(opened);
    if (!session || session.a !== id) return undefined;
    if (session.e * 1000 <= Date.now()) return 'expired';
    let principal: Exclude<Principal, { kind: 'admin' }> | undefined;
    if (session.k === 'upload_token') {
      const token = await tokens.resolveById(session.i);
      if (token === 'expired') return 'expired';
      principal = token;
    } else {
      const key = await projects.getApiKey(session.i);
      if (key) principal = { kind: 'api_key', ...key };
    }
    if (!principal || principal.projectId !== session.p) return undefined;
    const project = await projects.getProject(session.p);
    if (!project) return undefined;
    return { secretAccessKey: derivedSecret(id), principal, project };
  }

  return {
    /** Creates a credential; its secret is in the result and, sealed, in its row only. */
    async create(
      projectId: string,
      name: string,
      scopes: S3Scope[],
      audit: AuditContext,
    ): Promise<CreatedS3Credential> {
      if (name.trim() === '') throw validationError('name must not be blank', { field: 'name' });
      const id = accessKeyId(LONG_LIVED_PREFIX);
      const secret = randomBytes(SECRET_BYTES).toString('base64url');
      const created = await db.tx(async (q) => {
        const inserted = await repo.insertCredential(q, {
          id: newId('key'),
          projectId,
          name,
          accessKeyId: id,
          secretSealed: seal(atRestKey, secret, atRestContext(id)),
          scopes,
        });
        await recordAudit(q, audit, {
          action: 's3_credential.create',
          projectId,
          targets: { s3_credential_id: inserted.id },
          after: { name, access_key_id: id, scopes },
        });
        return inserted;
      });
      return {
        id: created.id,
        name: created.name,
        access_key_id: created.access_key_id,
        secret_access_key: secret,
        scopes: created.scopes,
        created_at: created.created_at,
      };
    },

    list(projectId: string): Promise<S3Credential[]> {
      return repo.listCredentials(db, projectId);
    },

    /** Revokes a credential: refused from now on, by every server (the lookup cache is evicted). */
    async revoke(projectId: string, id: string, audit: AuditContext): Promise<void> {
      const revoked = await db.tx(async (q) => {
        const accessKey = await repo.revokeCredential(q, projectId, id);
        if (accessKey === undefined) throw notFound('S3 credential');
        await recordAudit(q, audit, {
          action: 's3_credential.revoke',
          projectId,
          targets: { s3_credential_id: id },
        });
        return accessKey;
      });
      await evict(cache, credentialCacheKey(revoked));
    },

    /**
     * Temporary credentials acting as the caller (an upload token, with every constraint of it, or an
     * API key, with its scopes), for `expiresIn` seconds (1 hour by default) and never past the token's
     * own expiry.
     */
    async createTemporary(
      caller: Caller,
      expiresIn: number | undefined,
      audit: AuditContext,
    ): Promise<TemporaryS3Credentials> {
      const { principal, project } = caller;
      if (principal.kind !== 'upload_token' && principal.kind !== 'api_key') {
        throw wrongCredentialKind(
          'Temporary S3 credentials are issued to an upload token or an API key; with the admin key, create S3 credentials instead',
          ['upload_token', 'api_key'],
        );
      }
      let expiresAt = Date.now() + (expiresIn ?? TEMPORARY_DEFAULT_SECONDS) * 1000;
      let prefix = '';
      if (principal.kind === 'upload_token') {
        const token = await tokens.describe(principal.tokenId);
        if (!token) throw unauthenticated();
        expiresAt = Math.min(expiresAt, token.expiresAt.getTime());
        if (token.folderId !== null) prefix = `${(await folders.get(project.id, token.folderId)).path}/`;
      }
      // Whole seconds, rounded down: never later than the token.
      const expiration = Math.floor(expiresAt / 1000);
      const id = accessKeyId(TEMPORARY_PREFIX);
      const actsAs = principal.kind === 'upload_token' ? principal.tokenId : principal.keyId;
      const session: Session = { a: id, k: principal.kind, i: actsAs, p: project.id, e: expiration };
      const expirationIso = new Date(expiration * 1000).toISOString();
      await recordAudit(db, audit, {
        action: 's3_credential.create_temporary',
        projectId: project.id,
        targets: principal.kind === 'upload_token' ? { upload_token_id: actsAs } : { api_key_id: actsAs },
        after: { access_key_id: id, expiration: expirationIso, prefix },
      });
      return {
        access_key_id: id,
        secret_access_key: derivedSecret(id),
        session_token: seal(sessionKey, JSON.stringify(session), SESSION_CONTEXT),
        expiration: expirationIso,
        region: deps.region,
        endpoint,
        bucket: project.bucket,
        prefix,
      };
    },

    /**
     * The secret of an access key, the principal it speaks for and that principal's project, as the
     * SigV4 verifier needs them; undefined for an unknown or revoked credential, and for a session
     * token that is missing (temporary), present (long-lived), altered, or not the key's own.
     * A temporary credential's upload token or API key is resolved afresh: it fails once the key was
     * revoked, and is 'expired' past its expiration or its upload token's (clients then ask for new
     * credentials). With `key`, a long-lived credential read from the database brings the newest
     * file S3 shows at that key of its project in the same round trip (`atKey`).
     */
    async resolveS3Credential(
      accessKeyId: string,
      sessionToken: string | undefined,
      key?: string,
    ): Promise<ResolvedS3Credential | 'expired' | undefined> {
      const token = sessionToken === '' ? undefined : sessionToken;
      if (LONG_LIVED_ID.test(accessKeyId)) {
        return token === undefined ? resolveLongLived(accessKeyId, key) : undefined;
      }
      if (TEMPORARY_ID.test(accessKeyId) && token !== undefined) return resolveTemporary(accessKeyId, token);
      return undefined;
    },
  };
}

export type S3CredentialService = ReturnType<typeof createS3CredentialService>;
