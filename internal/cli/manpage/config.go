package manpage

import (
	"strings"

	"github.com/coffer-backup/coffer/internal/config"
)

// ConfigPageName is the configuration file's page, section 5.
const ConfigPageName = "coffer.yaml"

// ConfigFileName is its file: "coffer.yaml.5".
const ConfigFileName = ConfigPageName + ".5"

// ConfigPage renders coffer.yaml(5): every setting of keys (the table
// `coffer config keys` prints), with its flag, environment variable and
// default, and the structured sections. intro is the description's text.
func (m Manual) ConfigPage(keys []config.Key, sections []string, intro string) []byte {
	var b strings.Builder
	m.header(&b, strings.ToUpper(ConfigPageName), "5")
	b.WriteString(".SH NAME\n" + escape(ConfigPageName) + " \\- coffer's configuration file\n")
	b.WriteString(".SH SYNOPSIS\n\\fB/etc/coffer/coffer.yaml\\fR, \\fB~/.config/coffer/config.yaml\\fR, \\fB$COFFER_CONFIG\\fR, " +
		"\\fBcoffer \\-\\-config\\fR \\fIFILE\\fR\n")
	b.WriteString(".SH DESCRIPTION\n")
	renderBody(&b, strings.Split(intro, "\n"), false)
	b.WriteString(".SH SETTINGS\n")
	for _, k := range keys {
		b.WriteString(".TP\n\\fB" + escape(k.Name) + "\\fR\n" + prose(k.Usage) + "\n")
		var facts []string
		if k.Flag != "" {
			facts = append(facts, "Flag: \\fB\\-\\-"+escape(k.Flag)+"\\fR.")
		}
		if k.Env != "" {
			facts = append(facts, "Environment: \\fB"+escape(k.Env)+"\\fR.")
		}
		if k.Default != "" {
			facts = append(facts, "Default: "+escape(k.Default)+".")
		}
		if k.Secret {
			facts = append(facts, "A secret: it has no flag, and \\fBcoffer config show\\fR hides its value.")
		}
		if len(facts) > 0 {
			b.WriteString(".br\n" + strings.Join(facts, " ") + "\n")
		}
	}
	b.WriteString(".SH SECTIONS\n.PP\nStructured sections of the file, each checked against its own schema when the file is read:\n" +
		escape(strings.Join(sections, ", ")) + ".\n")
	b.WriteString(".SH EXAMPLES\n.PP\n.nf\n.RS 4\n" +
		"repository: /srv/coffer/repo\n" +
		"password\\-file: /etc/coffer/password\n" +
		"catalog: /var/lib/coffer/catalog.db\n" +
		"log\\-level: info\n" +
		".RE\n.fi\n")
	b.WriteString(".SH SEE ALSO\n" + ref("coffer", "1") + ",\n" + ref("coffer-config-keys", "1") + ",\n" + ref("coffer-config-show", "1") + "\n")
	return []byte(b.String())
}
