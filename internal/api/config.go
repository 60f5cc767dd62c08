package api

// ConfigShow is every setting's effective value and where it came from.
type ConfigShow struct {
	File     string    `json:"file"`
	Settings []Setting `json:"settings"`
}

// Setting is one setting; secrets read "(set, hidden)".
type Setting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"` // flag, environment, file, default
}

// ConfigKey is one setting coffer knows.
type ConfigKey struct {
	Key         string `json:"key"`
	Flag        string `json:"flag,omitempty"`
	Environment string `json:"environment,omitempty"`
	Default     string `json:"default"`
	Usage       string `json:"usage"`
	Secret      bool   `json:"secret"`
}
