package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// ConfigFile is the configuration a check reads from the directory it
// runs in, when there is one.
const ConfigFile = ".toolcatalog-check.yaml"

// Config is a check's configuration.
type Config struct {
	// FailOn is the least severity that fails the check: error (the
	// default), warning or info.
	FailOn string `json:"failOn,omitempty"`
	// Rules sets rules' severities by ID: error, warning, info or off.
	// The rules of what the cluster refuses cannot be changed.
	Rules map[string]Setting `json:"rules,omitempty"`
	// DescriptionMinLength is the fewest characters a description
	// should have (TC102); 40 when 0.
	DescriptionMinLength int `json:"descriptionMinLength,omitempty"`
	// DescriptionMaxTokens is the most tokens (about four bytes each) a
	// description should take (TC103); 300 when 0.
	DescriptionMaxTokens int `json:"descriptionMaxTokens,omitempty"`
	// Namespace is the namespace of objects that name none, as kubectl
	// apply would take it from its context; "default" when empty.
	Namespace string `json:"namespace,omitempty"`

	severities map[string]Severity
}

// Setting is a rule's severity in a configuration: error, warning, info
// or off (YAML reads an unquoted off as false, taken as off too).
type Setting string

// UnmarshalJSON reads a severity, or false for off.
func (s *Setting) UnmarshalJSON(raw []byte) error {
	if string(raw) == "false" {
		*s = "off"
		return nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("a rule's setting is error, warning, info or off, not %s", raw)
	}
	if v == "false" {
		// sigs.k8s.io/yaml gives a string field YAML's false as "false".
		v = "off"
	}
	*s = Setting(v)
	return nil
}

// Defaults of Config.
const (
	DefaultDescriptionMinLength = 40
	DefaultDescriptionMaxTokens = 300
)

// LoadConfig reads a configuration file; a missing file is the default
// configuration when optional.
func LoadConfig(path string, optional bool) (Config, error) {
	var c Config
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && optional {
		return c, c.Compile()
	}
	if err != nil {
		return c, err
	}
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Compile(); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Compile checks the configuration and readies it for use.
func (c *Config) Compile() error {
	c.severities = map[string]Severity{}
	for id, value := range c.Rules {
		rule, ok := RuleByID(id)
		if !ok {
			return fmt.Errorf("rules: %s is not a rule", id)
		}
		s, err := ParseSeverity(string(value))
		if err != nil {
			return fmt.Errorf("rules: %s: %w", id, err)
		}
		if rule.Cluster && s != rule.Severity {
			return fmt.Errorf("rules: %s (%s) cannot be changed: the cluster refuses what it finds", id, rule.Name)
		}
		c.severities[id] = s
	}
	if c.FailOn != "" {
		s, err := ParseSeverity(c.FailOn)
		if err != nil || s == 0 {
			return fmt.Errorf("failOn: %q is not error, warning or info", c.FailOn)
		}
	}
	if c.DescriptionMinLength < 0 || c.DescriptionMaxTokens < 0 {
		return errors.New("descriptionMinLength and descriptionMaxTokens cannot be negative")
	}
	return nil
}

// severity is a rule's severity as configured, 0 when off.
func (c *Config) severity(r Rule) Severity {
	if s, ok := c.severities[r.ID]; ok {
		return s
	}
	return r.Severity
}

// FailSeverity is the least severity that fails the check.
func (c *Config) FailSeverity() Severity {
	if s, err := ParseSeverity(c.FailOn); err == nil && s != 0 {
		return s
	}
	return Error
}

func (c *Config) namespace() string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return "default"
}

func (c *Config) minLength() int {
	if c.DescriptionMinLength > 0 {
		return c.DescriptionMinLength
	}
	return DefaultDescriptionMinLength
}

func (c *Config) maxTokens() int {
	if c.DescriptionMaxTokens > 0 {
		return c.DescriptionMaxTokens
	}
	return DefaultDescriptionMaxTokens
}
