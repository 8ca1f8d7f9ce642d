package config

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestREADME_ConfigurationTableMatchesTheOptions(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	MarkdownTable(&want)
	if !strings.Contains(string(readme), want.String()) {
		t.Errorf("README.md's configuration table is out of date; replace it with:\n%s", want.String())
	}
}
