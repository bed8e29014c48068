-- Who last defined a team metric (define_metric): the person and OS login
-- behind the client that called it, '' when not known (definitions made
-- before this column, or by a library caller that names no one). A
-- verification reads it to say who redefined a metric after an incident's
-- onset, since a new definition can flip the verdict.
ALTER TABLE incident_metrics ADD COLUMN defined_by TEXT NOT NULL DEFAULT '';
