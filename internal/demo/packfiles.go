package demo

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
)

// PackFiles renders a pack's metadata files (everything but the warehouse
// tables), keyed by path relative to the pack directory. Times are on
// PackDay; ReadPack moves them.
func PackFiles(pack string) (map[string][]byte, error) {
	if err := CheckPack(pack); err != nil {
		return nil, err
	}
	tl := Timeline(PackDay.Add(offQualityCheck))
	if pack == "billing" {
		return billingFiles(tl)
	}
	return loyaltyFiles(tl)
}

// WritePackFiles writes a pack's metadata files under root/<pack>/.
func WritePackFiles(root, pack string) error {
	files, err := PackFiles(pack)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		path := filepath.Join(root, pack, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func jsonFile(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// uuidFor is a name-based UUID (version 5 layout over SHA-1), so ids in the
// pack files are stable from one generation to the next.
func uuidFor(name string) string {
	sum := sha1.Sum([]byte("dataworkers-demo/" + name))
	b := sum[:16]
	b[6] = (b[6] & 0x0f) | 0x50
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// hexID is a 32-hex-digit id (Flink job ids) derived from name.
func hexID(name string) string {
	sum := sha1.Sum([]byte("dataworkers-demo/" + name))
	return hex.EncodeToString(sum[:16])
}

// people.yaml: a dw.yaml fragment.

type personYAML struct {
	ID      string   `yaml:"id"`
	Name    string   `yaml:"name"`
	Email   string   `yaml:"email"`
	SlackID string   `yaml:"slack_id"`
	OSUsers []string `yaml:"os_users"`
}

type domainYAML struct {
	Name           string   `yaml:"name"`
	Assets         []string `yaml:"assets"`
	Autonomy       string   `yaml:"autonomy"`
	Owners         []string `yaml:"owners"`
	Approvers      []string `yaml:"approvers,omitempty"`
	Copy           []string `yaml:"copy,omitempty"`
	ApprovalExpiry string   `yaml:"approval_expiry"`
}

func peopleFile(header string, people []personYAML, domains []domainYAML) ([]byte, error) {
	body, err := yaml.Marshal(struct {
		People  []personYAML `yaml:"people"`
		Domains []domainYAML `yaml:"domains"`
	}{people, domains})
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		b.WriteString("# " + line + "\n")
	}
	b.Write(body)
	return []byte(b.String()), nil
}

func person(id, name, slack string) personYAML {
	first, last, _ := strings.Cut(name, " ")
	email := strings.ToLower(asciiFold(first) + "." + asciiFold(last) + "@example.com")
	return personYAML{ID: id, Name: name, Email: email, SlackID: slack, OSUsers: []string{id}}
}

func asciiFold(s string) string {
	return strings.NewReplacer("á", "a", "é", "e", "í", "i", "ó", "o", "ú", "u", "ö", "o", "ä", "a").Replace(s)
}

// Avro schemas.

type avroField struct {
	Name    string          `json:"name"`
	Type    any             `json:"type"`
	Default json.RawMessage `json:"default,omitempty"`
	Doc     string          `json:"doc,omitempty"`
}

type avroRecord struct {
	Type      string      `json:"type"`
	Name      string      `json:"name"`
	Namespace string      `json:"namespace"`
	Doc       string      `json:"doc,omitempty"`
	Fields    []avroField `json:"fields"`
}

var (
	nullDefault = json.RawMessage("null")
	optLong     = []any{"null", "long"}
	tsMillis    = map[string]any{"type": "long", "logicalType": "timestamp-millis"}
)

func avroFile(r avroRecord) ([]byte, error) { return jsonFile(r) }

// Change log helpers.

func changesFile(changes []Change) ([]byte, error) {
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].At.Before(changes[j].At) })
	for i := range changes {
		if changes[i].ID == "" {
			return nil, fmt.Errorf("change %d has no id", i)
		}
	}
	return jsonFile(changes)
}
