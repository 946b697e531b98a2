import type { Api, Budget, List, User, VirtualKey } from './api.ts';

/**
 * Names instead of ids: a user's name (alias), a key's name, a budget's name. Where a record has no name (a budget
 * created without one) or is gone (usage rows outlive deleted keys and users) the id is shown instead.
 */
export class Names {
  readonly #users: Map<string, string>;
  readonly #keys: Map<string, string>;
  readonly #budgets: Map<string, string>;

  constructor(users: User[], keys: VirtualKey[], budgets: Budget[]) {
    this.#users = new Map(users.map((user) => [user.user_id, user.alias.trim() || user.user_id]));
    this.#keys = new Map(keys.map((key) => [key.id, key.key_name]));
    this.#budgets = new Map(budgets.map((budget) => [budget.budget_id, budgetName(budget)]));
  }

  user = (id: string | null): string => (id === null ? '—' : (this.#users.get(id) ?? id));
  key = (id: string | null): string => (id === null ? '—' : (this.#keys.get(id) ?? id));
  budget = (id: string | null): string => (id === null ? '—' : (this.#budgets.get(id) ?? id));

  /** Whether every user and key of these ids has a name here (else the lists are older than the ids). */
  knows(users: (string | null)[], keys: (string | null)[]): boolean {
    return users.every((id) => id === null || this.#users.has(id)) && keys.every((id) => id === null || this.#keys.has(id));
  }
}

/** A budget's name, or its id when it has none. */
export const budgetName = (budget: Budget): string => budget.name?.trim() || budget.budget_id;

/** The users, keys and budgets, read together. */
export async function readRecords(api: Api): Promise<{ users: User[]; keys: VirtualKey[]; budgets: Budget[]; names: Names }> {
  const [users, keys, budgets] = await Promise.all([api.call<List<User>>('GET', '/v1/users'), api.call<List<VirtualKey>>('GET', '/v1/keys'), api.call<List<Budget>>('GET', '/v1/budgets')]);
  return { users: users.data, keys: keys.data, budgets: budgets.data, names: new Names(users.data, keys.data, budgets.data) };
}
