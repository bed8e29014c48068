package connect

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/suggest"
)

// ConfigDefinition describes one config key of a plugin, as the validate
// endpoint returns it.
type ConfigDefinition struct {
	Name          string   `json:"name"`
	Type          string   `json:"type"`
	Required      bool     `json:"required"`
	DefaultValue  *string  `json:"default_value"`
	Importance    string   `json:"importance"`
	Documentation string   `json:"documentation"`
	Group         *string  `json:"group"`
	Width         string   `json:"width"`
	DisplayName   string   `json:"display_name"`
	Dependents    []string `json:"dependents"`
	Order         int      `json:"order"`
}

// ConfigValue is the worker's verdict on one config key.
type ConfigValue struct {
	Name              string   `json:"name"`
	Value             *string  `json:"value"`
	RecommendedValues []string `json:"recommended_values"`
	Errors            []string `json:"errors"`
	Visible           bool     `json:"visible"`
}

// ConfigInfo pairs a definition with its verdict.
type ConfigInfo struct {
	Definition ConfigDefinition `json:"definition"`
	Value      ConfigValue      `json:"value"`
}

// ConfigInfos is the body of PUT /connector-plugins/{plugin}/config/validate.
type ConfigInfos struct {
	Name       string       `json:"name"`
	ErrorCount int          `json:"error_count"`
	Groups     []string     `json:"groups"`
	Configs    []ConfigInfo `json:"configs"`
}

// FieldError is one config key the worker rejected.
type FieldError struct {
	Field         string   `json:"field"`
	DisplayName   string   `json:"display_name,omitempty"`
	Group         string   `json:"group,omitempty"`
	Value         *string  `json:"value" jsonschema:"the value given, null when missing"`
	Required      bool     `json:"required"`
	Errors        []string `json:"errors"`
	Documentation string   `json:"documentation,omitempty"`
	Recommended   []string `json:"recommended_values,omitempty"`
}

// Validation is the outcome of validating a connector config against the
// installed plugin.
type Validation struct {
	Plugin     string       `json:"plugin"`
	Valid      bool         `json:"valid"`
	ErrorCount int          `json:"error_count"`
	Errors     []FieldError `json:"errors,omitempty" jsonschema:"config keys the worker rejected, with their messages: the first 50 (errors_total counts them all; fix these and validate again)"`
	// ErrorsTotal counts every rejected key when Errors lists the first.
	ErrorsTotal int      `json:"errors_total,omitempty" jsonschema:"config keys rejected, in all"`
	Groups      []string `json:"groups,omitempty"`
}

// What a validation lists: a config can be refused on every key of a
// plugin with thousands of them.
const (
	listedFieldErrors, fieldErrorsBudget = 50, 30_000
	fieldMessages, recommendedValues     = 5, 20
	docChars                             = 500
	listedGroups                         = 50
)

// summaryErrors is how many rejected keys Summary names.
const summaryErrors = 20

// Summary is a few lines a person can read in the client.
func (v *Validation) Summary() string {
	if v.Valid {
		return fmt.Sprintf("config is valid for %s", v.Plugin)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors validating against %s:", v.ErrorCount, v.Plugin)
	for i, e := range v.Errors {
		if i == summaryErrors {
			fmt.Fprintf(&b, "\n… %d keys rejected in all", max(v.ErrorsTotal, len(v.Errors)))
			break
		}
		fmt.Fprintf(&b, "\n- %s: %s", e.Field, strings.Join(e.Errors, "; "))
	}
	return b.String()
}

// ValidateParams is the input of validate_connector_config.
type ValidateParams struct {
	Plugin string            `json:"plugin" jsonschema:"connector plugin class, e.g. com.wepay.kafka.connect.bigquery.BigQuerySinkConnector, or its alias"`
	Config map[string]string `json:"config" jsonschema:"the connector config to check, as it would be submitted"`
}

// Validate asks the worker to validate config for plugin (a class name or
// one of Connect's aliases) without creating anything. connector.class is
// filled from plugin when the config leaves it out, as Connect needs it to
// find the plugin. An unknown plugin is an error naming the closest
// installed ones.
func (c *Client) Validate(ctx context.Context, plugin string, config map[string]string) (*Validation, error) {
	if strings.TrimSpace(plugin) == "" {
		return nil, errors.New("connect: validate needs a plugin class, e.g. io.confluent.connect.jdbc.JdbcSinkConnector")
	}
	body := maps.Clone(config)
	if body == nil {
		body = map[string]string{}
	}
	if _, ok := body["connector.class"]; !ok {
		body["connector.class"] = plugin
	}
	var infos ConfigInfos
	path := "/connector-plugins/" + url.PathEscape(plugin) + "/config/validate"
	if err := c.do(ctx, http.MethodPut, path, nil, body, &infos); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || strings.Contains(ae.Message, "Failed to find any class")) {
			if ps, perr := c.Plugins(ctx); perr == nil {
				classes := make([]string, 0, len(ps))
				for _, p := range ps {
					classes = append(classes, p.Class)
				}
				return nil, fmt.Errorf("connect: plugin %q is not installed on %s; closest: %s", plugin, c.base, strings.Join(suggest.Closest(plugin, classes, 3), ", "))
			}
		}
		return nil, err
	}
	return Summarize(&infos), nil
}

// Summarize keeps the rejected keys of a validate answer.
func Summarize(infos *ConfigInfos) *Validation {
	v := &Validation{Plugin: infos.Name, ErrorCount: infos.ErrorCount, Groups: infos.Groups}
	for _, ci := range infos.Configs {
		if len(ci.Value.Errors) == 0 {
			continue
		}
		fe := FieldError{
			Field: ci.Value.Name, DisplayName: ci.Definition.DisplayName, Value: ci.Value.Value,
			Required: ci.Definition.Required, Errors: ci.Value.Errors, Documentation: ci.Definition.Documentation,
			Recommended: ci.Value.RecommendedValues,
		}
		if fe.Field == "" {
			fe.Field = ci.Definition.Name
		}
		if ci.Definition.Group != nil {
			fe.Group = *ci.Definition.Group
		}
		fe.Errors = fe.Errors[:min(len(fe.Errors), fieldMessages)]
		fe.Recommended = fe.Recommended[:min(len(fe.Recommended), recommendedValues)]
		fe.Documentation = clip(fe.Documentation, docChars)
		if fe.Value != nil {
			val := clip(*fe.Value, docChars)
			fe.Value = &val
		}
		v.Errors = append(v.Errors, fe)
	}
	v.Valid = v.ErrorCount == 0 && len(v.Errors) == 0
	if n := len(v.Errors); n > 0 {
		if head := bound.Head(v.Errors, listedFieldErrors, fieldErrorsBudget); len(head) < n {
			v.Errors, v.ErrorsTotal = head, n
		}
	}
	v.Groups = v.Groups[:min(len(v.Groups), listedGroups)]
	return v
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
