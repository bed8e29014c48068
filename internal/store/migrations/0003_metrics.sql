-- Metric history and quality expectations (packages baseline and checks).

-- One value of one series per bucket: the series is (asset, metric,
-- dimension, grain); bucket_ms is the bucket's start for bucketed checks
-- and team metrics, or the observation time for whole-table snapshots
-- (grain ''). A re-run of the same bucket replaces its value.
CREATE TABLE metric_points (
    asset TEXT NOT NULL,
    metric TEXT NOT NULL,
    dimension TEXT NOT NULL,
    grain TEXT NOT NULL,
    bucket_ms BIGINT NOT NULL,
    value DOUBLE NOT NULL,
    observed_ms BIGINT NOT NULL,
    PRIMARY KEY (asset, metric, dimension, grain, bucket_ms)
);

-- Reading a whole asset's history for one check run scans by asset and time.
CREATE INDEX metric_points_asset_time ON metric_points (asset, bucket_ms);

-- What set_quality_expectations recorded for a table, as one JSON document
-- already resolved to the catalog's column spelling.
CREATE TABLE quality_expectations (
    warehouse TEXT NOT NULL,
    table_ref TEXT NOT NULL,
    spec TEXT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (warehouse, table_ref)
);
