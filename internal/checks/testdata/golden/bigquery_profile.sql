SELECT
  COUNT(*) AS m0,
  COUNT(`member_id`) AS m1,
  COUNT(`balance`) AS m2,
  COUNT(`tier`) AS m3,
  COUNT(`last_store_id`) AS m4,
  COUNT(`event_time`) AS m5,
  COUNT(`_ingested_at`) AS m6,
  COUNT(`local_time`) AS m7,
  COUNT(`day`) AS m8,
  COUNT(`attrs`) AS m9,
  COUNT(DISTINCT `member_id`) AS m10,
  MAX(`event_time`) AS m11,
  SUM(TIMESTAMP_DIFF(`_ingested_at`, `event_time`, MILLISECOND)) AS m12,
  COUNT(TIMESTAMP_DIFF(`_ingested_at`, `event_time`, MILLISECOND)) AS m13,
  APPROX_QUANTILES(TIMESTAMP_DIFF(`_ingested_at`, `event_time`, MILLISECOND), 100)[OFFSET(95)] AS m14
FROM `acme-prod.loyalty.member_balances`;
