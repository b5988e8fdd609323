CREATE TABLE webhooks (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  url text NOT NULL,
  events text[] NOT NULL,
  is_active boolean NOT NULL DEFAULT true,
  -- Kept as is: deliveries are signed with it (HMAC), so it cannot be a one-way hash.
  signing_secret text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  deleted_at timestamptz(3)
);
CREATE INDEX webhooks_project ON webhooks (project_id, id) WHERE deleted_at IS NULL;

-- One row per (event, webhook): written with the event, in the transaction of the change.
CREATE TABLE deliveries (
  id text COLLATE "C" PRIMARY KEY,
  webhook_id text COLLATE "C" NOT NULL REFERENCES webhooks (id),
  project_id text NOT NULL REFERENCES projects (id),
  event_id text COLLATE "C" NOT NULL,
  event text NOT NULL,
  payload jsonb NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz(3) NOT NULL,
  last_response_status integer,
  last_error text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_webhook ON deliveries (webhook_id, id DESC);
