/**
 * The studio's monitoring read (api/console/monitoring.ts) in the OpenAPI document (api/openapi/index.ts merges it):
 * an app's per-hour or per-day conversations, active users, messages, tokens, cost, latency and error rate.
 */
import { StatisticsQuery, StatisticsResponse } from '../console/monitoring.js';
import { appIdParam, queryParams } from './params.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

export const MONITORING_RESPONSES = { StatisticsResponse };

export function monitoringPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  return {
    '/console/api/apps/{app_id}/statistics': {
      get: {
        operationId: 'getAppStatistics',
        tags: ['console'],
        security: [{ ConsoleKey: [] }],
        parameters: [appIdParam, ...queryParams(StatisticsQuery)],
        summary:
          'Monitoring (Dify’s): per hour or day of `range` (today, last7days, last4weeks, last3months, all), in the time zone `tz`, ' +
          'the app’s conversations, active end users, messages, tokens, cost, latency p50/p95 of succeeded turns (seconds) and ' +
          'error rate (failed / finished), with the range’s totals; end users’ turns only (not the debugger’s). Empty buckets ' +
          'are listed with zeros. 400 `invalid_param` for hourly buckets over last3months or all; 404 for another tenant’s app.',
        responses: {
          '200': { description: 'The series.', content: { 'application/json': { schema: ref('StatisticsResponse') } } },
          ...errors(),
        },
      },
    },
  };
}
