-- Lag samples are read back by time (the judging window) and expire by time
-- (retention and downsampling in internal/kafka), for a whole cluster at
-- once. This index makes both a range scan over the rows concerned instead
-- of a walk over every stored sample of every group.
CREATE INDEX kafka_lag_samples_at ON kafka_lag_samples (cluster, at_ms);
