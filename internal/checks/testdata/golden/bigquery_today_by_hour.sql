SELECT
  TIMESTAMP_TRUNC(`event_time`, HOUR) AS bucket,
  COUNT(*) AS m0,
  COUNT(`balance`) AS m1,
  COUNT(`member_id`) AS m2,
  COUNT(DISTINCT `member_id`) AS m3,
  COUNT(CASE WHEN `member_id` IS NOT NULL AND `last_store_id` IS NOT NULL THEN 1 END) AS m4,
  COUNT(DISTINCT CASE WHEN `member_id` IS NOT NULL AND `last_store_id` IS NOT NULL THEN TO_JSON_STRING(STRUCT(`member_id`, `last_store_id`)) END) AS m5,
  MAX(`event_time`) AS m6,
  SUM(TIMESTAMP_DIFF(`_ingested_at`, `event_time`, MILLISECOND)) AS m7,
  COUNT(TIMESTAMP_DIFF(`_ingested_at`, `event_time`, MILLISECOND)) AS m8,
  APPROX_QUANTILES(TIMESTAMP_DIFF(`_ingested_at`, `event_time`, MILLISECOND), 100)[OFFSET(95)] AS m9,
  SUM(TIMESTAMP_DIFF(`_ingested_at`, CAST(`local_time` AS TIMESTAMP), MILLISECOND)) AS m10,
  COUNT(TIMESTAMP_DIFF(`_ingested_at`, CAST(`local_time` AS TIMESTAMP), MILLISECOND)) AS m11,
  APPROX_QUANTILES(TIMESTAMP_DIFF(`_ingested_at`, CAST(`local_time` AS TIMESTAMP), MILLISECOND), 100)[OFFSET(95)] AS m12,
  COUNT(`tier`) AS m13,
  COUNT(CASE WHEN `tier` NOT IN ('gold', 'silver', 'O\'Brien\\n') THEN 1 END) AS m14,
  COUNT(CASE WHEN `balance` < 0 OR `balance` > 10000000 THEN 1 END) AS m15,
  COUNT(CASE WHEN (((`tier` IS NOT NULL) AND ((LOWER(`tier`) LIKE 'g%') OR (`balance` BETWEEN 0 AND 100.5))) AND (`tier` <> 'it\'s')) THEN NULL ELSE 1 END) AS m16
FROM `acme-prod.loyalty.member_balances`
WHERE `event_time` >= TIMESTAMP '2025-03-11 00:00:00+00' AND `event_time` < TIMESTAMP '2025-03-12 00:00:00+00'
GROUP BY ROLLUP (TIMESTAMP_TRUNC(`event_time`, HOUR));
