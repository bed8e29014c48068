package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// data holds, per agent, what it answers to initialize and tools/list,
// written by go generate from the real agents (TestEmbeddedDataIsCurrent,
// which also fails when a file differs from what its agent answers).
// The files are indented for readable diffs; the starter compacts them
// back to the bytes the agent sends.
//
//go:embed data/*.json
var data embed.FS

// agentData is one agent's file.
type agentData struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Instructions is the static part of the agent's instructions; the
	// agent adds the configuration in use and, on the embedded default,
	// the demo time, which only it can know.
	Instructions string          `json:"instructions"`
	Capabilities json.RawMessage `json:"capabilities"`
	// Tools is the agent's whole tools/list result.
	Tools json.RawMessage `json:"tools"`
}

// agentNames lists the agents there is data for.
func agentNames() []string {
	files, _ := fs.Glob(data, "data/*.json")
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(f, "data/"), ".json"))
	}
	return names
}

// loadAgent reads an agent's data, its JSON in the agent's wire form.
func loadAgent(name string) (*agentData, error) {
	if !slices.Contains(agentNames(), name) {
		return nil, fmt.Errorf("unknown agent %q", name)
	}
	raw, err := data.ReadFile("data/" + name + ".json")
	if err != nil {
		return nil, err
	}
	var a agentData
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("data/%s.json: %w", name, err)
	}
	for _, field := range []*json.RawMessage{&a.Capabilities, &a.Tools} {
		var b bytes.Buffer
		if err := json.Compact(&b, *field); err != nil {
			return nil, fmt.Errorf("data/%s.json: %w", name, err)
		}
		*field = b.Bytes()
	}
	return &a, nil
}
