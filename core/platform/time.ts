/** Unix seconds, the time unit of Dify's API (created_at, expiration_time, …). */
export const unixSeconds = (d: Date): number => Math.floor(d.getTime() / 1000);
