-- Consumer lag samples: one row per group, topic and partition per sampled
-- round. A status is judged over a window of these (see internal/kafka), so
-- they must outlive the process that read them. Only the newest rows per
-- partition are kept (internal/kafka prunes after every round).
CREATE TABLE kafka_lag_samples (
    id AUTO_ID,
    cluster TEXT NOT NULL,
    group_name TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition_num INTEGER NOT NULL,
    at_ms BIGINT NOT NULL,
    committed_offset BIGINT NOT NULL,
    end_offset BIGINT NOT NULL,
    lag BIGINT NOT NULL
);
CREATE UNIQUE INDEX kafka_lag_samples_key ON kafka_lag_samples (cluster, group_name, topic, partition_num, at_ms);
