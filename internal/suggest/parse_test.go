package suggest

import (
	"errors"
	"testing"
)

type color string

var colors = []color{"red", "dark_green", "blue"}

func TestPick(t *testing.T) {
	aliases := map[string]color{"green": "dark_green", "": "red"}
	for s, want := range map[string]color{"red": "red", "  BLUE ": "blue", "Dark_Green": "dark_green", "GREEN": "dark_green", " ": "red"} {
		if got, ok := Pick(s, colors, aliases); !ok || got != want {
			t.Errorf("Pick(%q) = %q, %v; want %q", s, got, ok, want)
		}
	}
	for _, s := range []string{"purple", "re d", "green"} {
		if got, ok := Pick(s, colors, nil); ok {
			t.Errorf("Pick(%q) without aliases = %q", s, got)
		}
	}
}

func TestParse(t *testing.T) {
	if got, err := Parse("color", " Red", colors); err != nil || got != "red" {
		t.Fatalf("Parse(Red) = %q, %v", got, err)
	}
	_, err := Parse("color", "bleu", colors)
	var ue *UnknownError
	if !errors.As(err, &ue) || ue.What != "color" || ue.Given != "bleu" || len(ue.Valid) != 3 {
		t.Fatalf("Parse(bleu): %#v", err)
	}
	if want := `unknown color "bleu"; closest: blue, red (valid: red, dark_green, blue)`; err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
}
