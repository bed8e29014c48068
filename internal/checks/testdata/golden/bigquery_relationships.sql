SELECT
  COUNT(*) AS m0,
  COUNT(`member_id`) AS m1
FROM `acme-prod.loyalty.member_balances`;

SELECT
  COUNT(*) AS m2,
  MIN(c.`member_id`) AS m3
FROM `acme-prod.loyalty.member_balances` AS c
WHERE c.`member_id` IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM `acme-prod.loyalty.members` AS p WHERE p.`id` = c.`member_id`);
