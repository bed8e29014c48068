package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"
)

// The SDK decodes a request's params into its own type and, when that
// fails, answers with the decoder's words and the params whole: `unmarshaling
// "{…}" into a *mcp.CallToolParamsRaw: json: cannot unmarshal "5}" into Go
// struct field mcp.CallToolParamsRaw.name of type string`. That names Go
// types a client cannot act on, and echoes the request: a 10 MiB call with
// one wrong member got a 10 MiB answer. So the transport decodes params
// first, into the same types the same way (case-sensitive, as the SDK's
// decoder), and answers a bad one itself in the protocol's words, naming
// the member and what is valid.

// paramsOf gives a new value of the params type of each request method the
// SDK's server decodes (mcp/server.go serverMethodInfos). A method not
// listed is the SDK's to answer (method not found, or a notification).
var paramsOf = map[string]func() any{
	"initialize":               func() any { return new(mcp.InitializeParams) },
	"ping":                     func() any { return new(mcp.PingParams) },
	"tools/list":               func() any { return new(mcp.ListToolsParams) },
	"tools/call":               func() any { return new(mcp.CallToolParamsRaw) },
	"resources/list":           func() any { return new(mcp.ListResourcesParams) },
	"resources/templates/list": func() any { return new(mcp.ListResourceTemplatesParams) },
	"resources/read":           func() any { return new(mcp.ReadResourceParams) },
	"resources/subscribe":      func() any { return new(mcp.SubscribeParams) },
	"resources/unsubscribe":    func() any { return new(mcp.UnsubscribeParams) },
	"prompts/list":             func() any { return new(mcp.ListPromptsParams) },
	"prompts/get":              func() any { return new(mcp.GetPromptParams) },
	"completion/complete":      func() any { return new(mcp.CompleteParams) },
	"logging/setLevel":         func() any { return new(mcp.SetLoggingLevelParams) },
}

// paramsProblem is why a call's params cannot be read as its method's, in
// words; "" when they can (or the method is not one the SDK decodes). A
// missing or null params is left to the SDK, which words that itself.
func paramsProblem(req *jsonrpc.Request) string {
	mk, ok := paramsOf[req.Method]
	if !ok || !req.IsCall() {
		return ""
	}
	p := bytes.TrimSpace(req.Params)
	if len(p) == 0 || string(p) == "null" {
		return ""
	}
	if p[0] != '{' {
		return fmt.Sprintf("params of %s must be a JSON object, got %s", req.Method, rawKind(p))
	}
	dec := sjson.NewDecoder(bytes.NewReader(p))
	dec.DontMatchCaseInsensitiveStructFields()
	err := dec.Decode(mk())
	if err == nil {
		return ""
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		// The decoder's Value is the quoted start of the input at the
		// member; its first character says the JSON kind sent.
		got := "something else"
		if v, err := strconv.Unquote(te.Value); err == nil && v != "" {
			got = rawKind([]byte(v))
		}
		return fmt.Sprintf("params of %s: member '%s' must be %s, got %s", req.Method, clip(te.Field, 80), kindWords(te.Type), got)
	}
	return fmt.Sprintf("params of %s are not valid", req.Method)
}

// kindWords says what JSON a Go type is read from.
func kindWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "text (a JSON string)"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a valid value"
}

// rawKind words the JSON kind of a raw value by its first byte.
func rawKind(p []byte) string {
	switch r, _ := utf8.DecodeRune(p); r {
	case '[':
		return "a list"
	case '"':
		return "text"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}
