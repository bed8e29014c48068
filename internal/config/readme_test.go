package config

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeExampleParses keeps the README's dw.yaml example valid.
func TestReadmeExampleParses(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "```yaml\n")
	if start < 0 {
		t.Fatal("README has no yaml example")
	}
	rest := text[start+len("```yaml\n"):]
	end := strings.Index(rest, "```")
	if _, err := Parse("README.md", []byte(rest[:end])); err != nil {
		t.Fatalf("the README's dw.yaml example does not parse: %v", err)
	}
}
