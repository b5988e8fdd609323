import { Type } from 'typebox';
import { StringEnum } from '../../http/schemas.ts';

export const Liveness = Type.Object(
  { status: StringEnum(['ok'] as const) },
  { $id: 'Liveness', description: 'The process runs' },
);

const CheckState = StringEnum(['ok', 'unavailable'] as const);
export const Readiness = Type.Object(
  {
    status: StringEnum(['ok', 'degraded'] as const),
    checks: Type.Object({ database: CheckState, cache: CheckState, store: CheckState }),
  },
  { $id: 'Readiness', description: 'The state of each dependency; degraded (503) when one is unavailable' },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const healthSchemas = [Liveness, Readiness];
