SELECT
  date_trunc('hour', timezone('UTC', "hour")) AS bucket,
  COUNT(*) AS m0,
  COUNT("account_id") AS m1
FROM "usage"."usage_hourly"
WHERE "hour" >= TIMESTAMPTZ '2025-03-11 00:00:00+00' AND "hour" < TIMESTAMPTZ '2025-03-12 00:00:00+00'
GROUP BY date_trunc('hour', timezone('UTC', "hour"));

SELECT
  COUNT(*) AS m2,
  MIN(c."account_id") AS m3
FROM "usage"."usage_hourly" AS c
WHERE c."account_id" IS NOT NULL AND c."hour" >= TIMESTAMPTZ '2025-03-11 00:00:00+00' AND c."hour" < TIMESTAMPTZ '2025-03-12 00:00:00+00'
  AND NOT EXISTS (SELECT 1 FROM "usage"."usage_hourly" AS p WHERE p."account_id" = c."account_id");
