package config

import (
	"os"
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/config/configtest"
)

// The rules recipes of docs/protocols.md, each a fenced env block after a
// "<!-- recipe: name -->" comment.
func protocolRecipes(t *testing.T) map[string]map[string]string {
	t.Helper()
	text, err := os.ReadFile("../../docs/protocols.md")
	if err != nil {
		t.Fatal(err)
	}
	recipes := map[string]map[string]string{}
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		name, ok := strings.CutPrefix(lines[i], "<!-- recipe: ")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, " -->")
		if i+1 >= len(lines) || lines[i+1] != "```env" {
			t.Fatalf("docs/protocols.md:%d: recipe %s is not followed by an env block", i+1, name)
		}
		vars := map[string]string{}
		for i += 2; i < len(lines) && lines[i] != "```"; i++ {
			k, v, ok := strings.Cut(lines[i], "=")
			if !ok {
				t.Fatalf("docs/protocols.md:%d: recipe %s: %q is not NAME=value", i+1, name, lines[i])
			}
			vars[k] = v
		}
		recipes[name] = vars
	}
	return recipes
}

// TestProtocolRecipesLoad: every recipe docs/protocols.md gives is a
// configuration tether accepts as written, so a user who copies one gets
// no start-up error.
func TestProtocolRecipesLoad(t *testing.T) {
	recipes := protocolRecipes(t)
	for _, name := range []string{"graphql-ws-rules", "binance", "coinbase", "kraken", "deribit", "bitstamp", "action-cable"} {
		if _, ok := recipes[name]; !ok {
			t.Errorf("docs/protocols.md has no recipe %s", name)
		}
	}
	for name, vars := range recipes {
		if _, err := Load(configtest.WithURL(vars)); err != nil {
			t.Errorf("recipe %s: %v", name, err)
		}
	}
}
