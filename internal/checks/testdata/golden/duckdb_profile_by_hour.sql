SELECT
  date_trunc('hour', timezone('UTC', "hour")) AS bucket,
  COUNT(*) AS m0,
  COUNT("usage_id") AS m1,
  COUNT("account_id") AS m2,
  COUNT("egress_bytes") AS m3,
  COUNT("region") AS m4,
  COUNT("hour") AS m5,
  COUNT("loaded_at") AS m6,
  COUNT(DISTINCT "usage_id") AS m7,
  MAX("hour") AS m8,
  SUM(epoch_ms("loaded_at") - epoch_ms("hour")) AS m9,
  COUNT(epoch_ms("loaded_at") - epoch_ms("hour")) AS m10,
  quantile_cont(epoch_ms("loaded_at") - epoch_ms("hour"), 0.95) AS m11,
  COUNT(CASE WHEN "egress_bytes" = 0 THEN 1 END) AS m12,
  AVG("egress_bytes") AS m13,
  approx_quantile("egress_bytes", [0.5, 0.95])[1] AS m14,
  approx_quantile("egress_bytes", [0.5, 0.95])[2] AS m15,
  approx_count_distinct("region") AS m16,
  map_keys(histogram("region"))[list_position(map_values(histogram("region")), list_max(map_values(histogram("region"))))] AS m17,
  list_max(map_values(histogram("region"))) AS m18
FROM "usage"."usage_hourly"
WHERE "hour" >= TIMESTAMPTZ '2025-03-11 00:00:00+00' AND "hour" < TIMESTAMPTZ '2025-03-12 00:00:00+00'
GROUP BY ROLLUP (date_trunc('hour', timezone('UTC', "hour")));
