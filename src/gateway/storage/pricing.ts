import type { Row, SqlDriver, Statement } from './driver.ts';
import { sourceOf } from './rows.ts';
import type { ConfigSource, PricingPrices, PricingRecord } from './records.ts';

/**
 * Prices per model (table model_pricing). Writes are statements, run by the runtime configuration in one transaction
 * with their audit row and the change counter (runtime-config.ts).
 */
export class Pricing {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  /** Sets a model's prices (those left out are 0). */
  putStatement(pricing: PricingPrices & { model: string }, source: ConfigSource, now = Date.now()): Statement {
    return {
      sql: `INSERT INTO model_pricing (model, input_cost_per_million, output_cost_per_million, search_unit_cost_per_thousand, source, updated_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (model) DO UPDATE SET input_cost_per_million = excluded.input_cost_per_million,
         output_cost_per_million = excluded.output_cost_per_million, search_unit_cost_per_thousand = excluded.search_unit_cost_per_thousand,
         source = excluded.source, updated_at = excluded.updated_at`,
      params: [pricing.model, pricing.input_cost_per_million ?? 0, pricing.output_cost_per_million ?? 0, pricing.search_unit_cost_per_thousand ?? 0, source, now],
    };
  }

  deleteStatement(model: string): Statement {
    return { sql: 'DELETE FROM model_pricing WHERE model = ?', params: [model] };
  }

  async get(model: string): Promise<PricingRecord | null> {
    const rows = await this.#driver.all('SELECT * FROM model_pricing WHERE model = ?', [model]);
    return rows[0] ? pricingOf(rows[0]) : null;
  }

  async list(): Promise<PricingRecord[]> {
    return (await this.#driver.all('SELECT * FROM model_pricing ORDER BY model')).map(pricingOf);
  }
}

function pricingOf(row: Row): PricingRecord {
  return {
    model: String(row.model),
    input_cost_per_million: Number(row.input_cost_per_million),
    output_cost_per_million: Number(row.output_cost_per_million),
    search_unit_cost_per_thousand: Number(row.search_unit_cost_per_thousand),
    source: sourceOf(row.source),
    updated_at: Number(row.updated_at),
  };
}
