import { expect, it } from 'vitest';
import { CallLedger } from '../../src/gateway/ledger.ts';
import { GatewayMetrics } from '../../src/gateway/metrics.ts';
import type { BudgetHold, GatewayStore, KeyRecord } from '../../src/gateway/storage/index.ts';
import { UsageRecorder } from '../../src/gateway/usage-recorder.ts';

it("a database failure while reserving the second budget gives the first budget's hold back", async () => {
  const released: { budget: string; amount: number }[] = [];
  const store = {
    async getPricing(model: string) {
      return { model, input_cost_per_million: 1, output_cost_per_million: 1, search_unit_cost_per_thousand: 0, updated_at: 0 };
    },
    async reserveBudget(id: string, amount: number) {
      if (id === 'user-budget') throw new Error('connection terminated');
      return { budget_id: id, reserved_nanos: amount, holder: null };
    },
    async releaseBudget(hold: BudgetHold) {
      released.push({ budget: hold.budget_id, amount: hold.reserved_nanos });
    },
  } as unknown as GatewayStore;
  const metrics = new GatewayMetrics({ processMetrics: false });
  const ledger = new CallLedger({ store, recorder: new UsageRecorder(store), metrics, reserveOutputTokens: 1000 });
  const key = { id: 'key_1', budget_id: 'key-budget', user_id: 'owner', is_active: true, expires_at: null } as unknown as KeyRecord;
  const begun = ledger.begin({
    principal: { kind: 'virtual', key, ownerBudgetId: 'user-budget', ownerAllowedModels: null },
    user: undefined,
    endpoint: 'chat.completions',
    provider: 'openai',
    model: 'gpt',
    requestId: 'r1',
    estimatedPromptTokens: 10,
    maxOutputTokens: null,
  });
  await expect(begun).rejects.toThrow('connection terminated');
  expect(released).toEqual([{ budget: 'key-budget', amount: (10 + 1000) * 1000 }]);
});
