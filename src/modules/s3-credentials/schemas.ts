import { type Static, Type } from 'typebox';
import { ItemList, Nullable, StringEnum, Timestamp } from '../../http/schemas.ts';

/** What an S3 credential may be given: the S3 operations map onto these (Get/Head/List, Put/multipart/Copy, Delete). */
export const S3_SCOPES = ['files:read', 'files:upload', 'files:delete'] as const;
export type S3Scope = (typeof S3_SCOPES)[number];

/** Temporary credentials live 1 hour unless asked otherwise, between 1 minute and 12 hours. */
export const TEMPORARY_DEFAULT_SECONDS = 3600;
export const TEMPORARY_MIN_SECONDS = 60;
export const TEMPORARY_MAX_SECONDS = 43_200;

const AccessKeyId = Type.String({
  description: 'CFR followed by 17 uppercase letters and digits (CFT for temporary credentials)',
});
// Not blank: at least one character that is not white space (the service trims names).
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

export const S3Credential = Type.Object(
  {
    id: Type.String({ description: 'key_…' }),
    name: Type.String(),
    access_key_id: AccessKeyId,
    scopes: Type.Array(StringEnum(S3_SCOPES)),
    created_at: Timestamp,
    revoked_at: Nullable(Timestamp),
  },
  { $id: 'S3Credential', description: 'A long-lived S3 credential of a project, without its secret' },
);
export type S3Credential = Static<typeof S3Credential>;
export const S3CredentialList = ItemList(S3Credential);

export const CreatedS3Credential = Type.Object(
  {
    id: Type.String({ description: 'key_…' }),
    name: Type.String(),
    access_key_id: AccessKeyId,
    secret_access_key: Type.String({ description: '40 characters; shown only here' }),
    scopes: Type.Array(StringEnum(S3_SCOPES)),
    created_at: Timestamp,
  },
  { $id: 'CreatedS3Credential', description: 'The new S3 credential, with its secret' },
);
export type CreatedS3Credential = Static<typeof CreatedS3Credential>;

export const CreateS3CredentialBody = Type.Object(
  {
    name: Name,
    scopes: Type.Array(StringEnum(S3_SCOPES), { minItems: 1, uniqueItems: true }),
  },
  { $id: 'CreateS3CredentialRequest', additionalProperties: false },
);

export const CreateTemporaryS3CredentialsBody = Type.Object(
  {
    expires_in: Type.Optional(
      Type.Integer({
        minimum: TEMPORARY_MIN_SECONDS,
        maximum: TEMPORARY_MAX_SECONDS,
        description: `Lifetime in seconds (default ${TEMPORARY_DEFAULT_SECONDS}); never past the upload token's expires_at`,
      }),
    ),
  },
  { $id: 'CreateTemporaryS3CredentialsRequest', additionalProperties: false },
);

export const TemporaryS3Credentials = Type.Object(
  {
    access_key_id: AccessKeyId,
    secret_access_key: Type.String(),
    session_token: Type.String({ description: 'Sent as X-Amz-Security-Token (the SDKs: sessionToken)' }),
    expiration: Timestamp,
    region: Type.String({ description: 'The region to sign with (COFFER_S3_API_REGION)' }),
    endpoint: Type.String({ description: 'The S3 endpoint URL, path-style' }),
    bucket: Type.String({ description: "The project's bucket" }),
    prefix: Type.String({
      description: "The key prefix the upload token uploads under: its folder's path and '/', or ''",
    }),
  },
  {
    $id: 'TemporaryS3Credentials',
    description:
      'S3 credentials acting as the upload token or API key they were issued to, with its constraints or scopes, until expiration',
  },
);
export type TemporaryS3Credentials = Static<typeof TemporaryS3Credentials>;

/** The named schemas of this module, registered once with app.addSchema. */
export const s3CredentialSchemas = [
  S3Credential,
  S3CredentialList,
  CreatedS3Credential,
  CreateS3CredentialBody,
  CreateTemporaryS3CredentialsBody,
  TemporaryS3Credentials,
];
