SELECT
  DATETIME_TRUNC(`local_time`, DAY) AS bucket,
  COUNT(*) AS m0,
  COUNT(`tier`) AS m1
FROM `acme-prod.loyalty.member_balances`
WHERE `local_time` >= DATETIME '2025-03-04 00:00:00' AND `local_time` < DATETIME '2025-03-11 00:00:00'
GROUP BY DATETIME_TRUNC(`local_time`, DAY);
