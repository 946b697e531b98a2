import type { Row, SqlDriver } from './driver.ts';
import type { PricingPrices, PricingRecord } from './records.ts';

/** Prices per model (table model_pricing). */
export class Pricing {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  /** Prices left out are 0. */
  async upsert(pricing: PricingPrices & { model: string }, now = Date.now()): Promise<PricingRecord> {
    await this.#driver.run(
      `INSERT INTO model_pricing (model, input_cost_per_million, output_cost_per_million, search_unit_cost_per_thousand, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (model) DO UPDATE SET input_cost_per_million = excluded.input_cost_per_million,
         output_cost_per_million = excluded.output_cost_per_million, search_unit_cost_per_thousand = excluded.search_unit_cost_per_thousand,
         updated_at = excluded.updated_at`,
      [pricing.model, pricing.input_cost_per_million ?? 0, pricing.output_cost_per_million ?? 0, pricing.search_unit_cost_per_thousand ?? 0, now],
    );
    return (await this.get(pricing.model))!;
  }

  async get(model: string): Promise<PricingRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM model_pricing WHERE model = ?', [model]);
    return rows[0] ? pricingOf(rows[0]) : null;
  }

  async list(): Promise<PricingRecord[]> {
    return (await this.#driver.all('SELECT * FROM model_pricing ORDER BY model')).map(pricingOf);
  }

  async delete(model: string): Promise<boolean> {
    return (await this.#driver.run('DELETE FROM model_pricing WHERE model = ?', [model])) > 0;
  }
}

function pricingOf(row: Row): PricingRecord {
  return {
    model: String(row.model),
    input_cost_per_million: Number(row.input_cost_per_million),
    output_cost_per_million: Number(row.output_cost_per_million),
    search_unit_cost_per_thousand: Number(row.search_unit_cost_per_thousand),
    updated_at: Number(row.updated_at),
  };
}
