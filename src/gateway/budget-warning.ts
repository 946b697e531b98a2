import { dollars } from './money.ts';
import type { BudgetAdmission } from './storage/index.ts';

/** The answer header that tells a client one of its budgets is past its soft budget (the call was still admitted). */
export const BUDGET_WARNING_HEADER = 'x-budget-warning';

/** A budget a call held whose spend this period had reached its soft budget when the call was admitted. */
export interface BudgetWarning {
  budget_id: string;
  /** Whose budget: the virtual key's or the charged user's. */
  scope: 'key' | 'user';
  spend_nanos: bigint;
  soft_budget_nanos: bigint;
  max_budget_nanos: bigint;
}

/** The warning an admission carries, or null while its budget is below its soft budget (or has none). */
export function budgetWarningOf(admission: BudgetAdmission, scope: BudgetWarning['scope']): BudgetWarning | null {
  const soft = admission.soft_budget_nanos;
  if (soft === null || admission.spend_nanos < soft) return null;
  return { budget_id: admission.hold.budget_id, scope, spend_nanos: admission.spend_nanos, soft_budget_nanos: soft, max_budget_nanos: admission.max_budget_nanos };
}

/**
 * The header's value: one entry per budget, comma-separated, each its id then `;`-separated parameters in US dollars,
 * e.g. `budget_R4Iy…; scope=key; spend=4.2; soft_budget=4; max_budget=5`.
 */
export function budgetWarningHeader(warnings: readonly BudgetWarning[]): string {
  return warnings
    .map((w) => `${w.budget_id}; scope=${w.scope}; spend=${dollars(w.spend_nanos)}; soft_budget=${dollars(w.soft_budget_nanos)}; max_budget=${dollars(w.max_budget_nanos)}`)
    .join(', ');
}
