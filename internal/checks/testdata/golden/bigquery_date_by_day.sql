SELECT
  `day` AS bucket,
  COUNT(*) AS m0
FROM `acme-prod.loyalty.member_balances`
WHERE `day` >= DATE '2025-03-04' AND `day` < DATE '2025-03-11'
GROUP BY `day`;
