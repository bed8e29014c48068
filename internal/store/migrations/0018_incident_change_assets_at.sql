-- A diagnosis first reads the changes on the symptoms or upstream of them
-- (changelog.EachKeyOnAssets): a seek per upstream asset into
-- incident_change_assets_at finds that asset's changes in the window,
-- where reading the whole window read every change, most of them unrelated
-- to the symptoms. The time is copied from incident_changes (changelog
-- writes both in one transaction) so the seek stays inside the window
-- however long the log grows. A row whose change is gone (nothing deletes
-- changes; a test may) gets 0.
ALTER TABLE incident_change_assets ADD COLUMN at_ms BIGINT NOT NULL DEFAULT 0;
UPDATE incident_change_assets SET at_ms = COALESCE((SELECT c.at_ms FROM incident_changes c WHERE c.id = incident_change_assets.change_id), 0);
CREATE INDEX incident_change_assets_at ON incident_change_assets (asset, at_ms, change_id);

-- A writer that predates this migration (an agent still running the
-- binary from before an upgrade) inserts an asset row without its time,
-- which would then lie outside every window's seek: the store fills it in.
SQLITE_ONLY CREATE TRIGGER incident_change_assets_at_fill AFTER INSERT ON incident_change_assets WHEN NEW.at_ms = 0
BEGIN UPDATE incident_change_assets SET at_ms = COALESCE((SELECT c.at_ms FROM incident_changes c WHERE c.id = NEW.change_id), 0) WHERE asset = NEW.asset AND change_id = NEW.change_id; END;
POSTGRES_ONLY CREATE FUNCTION incident_change_assets_at_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.at_ms = 0 THEN NEW.at_ms := COALESCE((SELECT c.at_ms FROM incident_changes c WHERE c.id = NEW.change_id), 0); END IF; RETURN NEW; END $$;
POSTGRES_ONLY CREATE TRIGGER incident_change_assets_at_fill BEFORE INSERT ON incident_change_assets FOR EACH ROW EXECUTE FUNCTION incident_change_assets_at_fill();
