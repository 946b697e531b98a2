import type { z } from 'zod';
import { canonicalTimeZone, type ResetSchedule } from '../budget-periods.ts';
import { invalidRequest } from '../errors.ts';
import { dollars, nanosOf } from '../money.ts';
import type { BudgetFields, BudgetRecord } from '../storage/index.ts';
import type { CreateBudgetBody, UpdateBudgetBody } from './management-schemas.ts';

type BudgetBody = z.infer<typeof CreateBudgetBody> | z.infer<typeof UpdateBudgetBody>;

/**
 * What a POST (`stored` null) or PATCH of a budget changes, checked as the budget will be after it: a field left out
 * keeps its stored value, so switching a rolling budget to a calendar one is one request that also sets
 * reset_every_seconds to null (as in otari). 400 naming the field for a schedule that names two kinds of period, a
 * time zone without an alignment or one Intl does not know, and a soft budget not below max_budget.
 */
export function budgetChanges(body: BudgetBody, stored: BudgetRecord | null): Partial<BudgetFields> {
  const scheduleGiven = body.reset_every_seconds !== undefined || body.reset_alignment !== undefined || body.reset_time_zone !== undefined;
  const schedule = stored === null || scheduleGiven ? scheduleOf(body, stored) : undefined;
  const max = body.max_budget === undefined ? stored!.max_budget_nanos : nanosOf(body.max_budget);
  const soft = body.soft_budget === undefined ? (stored?.soft_budget_nanos ?? null) : body.soft_budget === null ? null : nanosOf(body.soft_budget);
  if (soft !== null && soft >= max) {
    throw invalidRequest(`soft_budget ($${dollars(soft)}) must be below max_budget ($${dollars(max)}): it warns before the limit refuses`, 'soft_budget');
  }
  return {
    name: body.name,
    max_budget_nanos: body.max_budget === undefined ? undefined : max,
    soft_budget_nanos: body.soft_budget === undefined ? undefined : soft,
    schedule,
    metadata: body.metadata,
  };
}

function scheduleOf(body: BudgetBody, stored: BudgetRecord | null): ResetSchedule {
  const every = body.reset_every_seconds !== undefined ? body.reset_every_seconds : (stored?.reset_every_seconds ?? null);
  const alignment = body.reset_alignment !== undefined ? body.reset_alignment : (stored?.reset_alignment ?? null);
  if (every !== null && alignment !== null) {
    const param = body.reset_alignment ? 'reset_alignment' : 'reset_every_seconds';
    throw invalidRequest('A budget starts again either every reset_every_seconds or on reset_alignment, not both: set the other to null', param);
  }
  if (alignment === null) {
    if (typeof body.reset_time_zone === 'string') throw invalidRequest('reset_time_zone is the zone of reset_alignment, which is not set', 'reset_time_zone');
    return every === null ? null : { every_seconds: every };
  }
  const requested = body.reset_time_zone !== undefined ? (body.reset_time_zone ?? 'UTC') : (stored?.reset_time_zone ?? 'UTC');
  const zone = canonicalTimeZone(requested);
  if (zone === null) throw invalidRequest(`reset_time_zone: unknown time zone "${requested}"; give an IANA name such as Europe/Berlin, America/New_York or UTC`, 'reset_time_zone');
  return { alignment, time_zone: zone };
}
