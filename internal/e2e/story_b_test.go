package e2e

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/story"
)

func TestStoryLoyalty(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	now := time.Date(2026, 3, 10, 18, 0, 0, 0, time.UTC)
	f, _ := os.Create("/tmp/sb/narration.txt")
	defer f.Close()
	run, err := story.Loyalty(ctx, &story.Env{BinDir: binDir, Home: "/tmp/sb/home", Out: f, Now: now})
	b, _ := jsonMarshal(run)
	os.WriteFile("/tmp/sb/run.json", b, 0o644)
	if err != nil {
		t.Fatal(err)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", " ") }
