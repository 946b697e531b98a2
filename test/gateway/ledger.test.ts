import { expect, it } from 'vitest';
import { CallLedger } from '../../src/gateway/ledger.ts';
import { GatewayMetrics } from '../../src/gateway/metrics.ts';
import type { BudgetHold, GatewayStore, KeyRecord } from '../../src/gateway/storage/index.ts';
import { UsageRecorder } from '../../src/gateway/usage-recorder.ts';

it("a database failure while reserving the second budget gives the first budget's hold back", async () => {
  const released: { budget: string; amount: bigint }[] = [];
  const store = {
    pricing: {
      async get(model: string) {
        return { model, input_cost_per_million: 1, output_cost_per_million: 1, search_unit_cost_per_thousand: 0, updated_at: 0 };
      },
    },
    budgets: {
      async admit(id: string, amount: bigint) {
        if (id === 'user-budget') throw new Error('connection terminated');
        return { hold: { budget_id: id, reserved_nanos: amount, holder: null }, spend_nanos: 0n, soft_budget_nanos: null, max_budget_nanos: 10n ** 12n };
      },
      async release(hold: BudgetHold) {
        released.push({ budget: hold.budget_id, amount: hold.reserved_nanos });
      },
    },
    usage: { async open() {}, async complete() {} },
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
  expect(released).toEqual([{ budget: 'key-budget', amount: BigInt((10 + 1000) * 1000) }]);
});

it('usage rows get time-ordered ids (UUIDv7), so new rows append to the primary-key index', async () => {
  const recorded: string[] = [];
  const store = {
    pricing: {
      async get(model: string) {
        return { model, input_cost_per_million: 1, output_cost_per_million: 1, search_unit_cost_per_thousand: 0, updated_at: 0 };
      },
    },
    instanceId: 'instance_test',
    usage: {
      async open() {},
      async complete(rows: { id: string }[]) {
        recorded.push(...rows.map((row) => row.id));
      },
    },
  } as unknown as GatewayStore;
  const metrics = new GatewayMetrics({ processMetrics: false });
  const ledger = new CallLedger({ store, recorder: new UsageRecorder(store), metrics, reserveOutputTokens: 1000 });
  const key = { id: 'key_1', budget_id: null, user_id: null, is_active: true, expires_at: null } as unknown as KeyRecord;
  for (let i = 0; i < 4; i++) {
    const ticket = await ledger.begin({
      principal: { kind: 'virtual', key, ownerBudgetId: null, ownerAllowedModels: null },
      user: undefined,
      endpoint: 'chat.completions',
      provider: 'openai',
      model: 'gpt',
      requestId: `r${i}`,
      estimatedPromptTokens: 1,
      maxOutputTokens: null,
    });
    await ledger.finish(ticket, { status: 'success', statusCode: 200, promptTokens: 1, completionTokens: 1 });
    await new Promise((resolve) => setTimeout(resolve, 3)); // the next millisecond: ids order by time at 1 ms
  }
  expect(recorded).toHaveLength(4);
  for (const id of recorded) expect(id).toMatch(/^usage_[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect([...recorded].sort()).toEqual(recorded);
  expect(new Set(recorded).size).toBe(4);
});
