package fire

// Connection URLs (spec "Transports"; each rule below is one of vectors/README.md's "urls.json in detail"):
//
//	fire://user:password@host:5673/vhost        ws://user:password@host:15672/fire?vhost=dev
//
// Go's net/url is not used: it accepts what the rules refuse (a port of 0 or of 6 digits, '+' in a port) and
// reads what they do not ('+' in a query as a space).

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// URL is a parsed connection URL.
type URL struct {
	Scheme    string // fire, fires, ws or wss, in lower case
	TLS       bool   // fires and wss
	WebSocket bool   // ws and wss
	Host      string // as written; an IPv6 literal without its brackets
	Port      int
	User      string
	Password  string
	Vhost     string
	Path      string // the WebSocket endpoint; "" for fire and fires
}

// "The default ports are 5673 (fire), 5674 (fires), 15672 (ws) and 15671 (wss)."
var defaultPorts = map[string]int{"fire": 5673, "fires": 5674, "ws": 15672, "wss": 15671}

// ParseURL parses a connection URL; an invalid one is an error saying why.
func ParseURL(text string) (*URL, error) {
	if text == "" {
		return nil, errors.New("empty URL")
	}
	if strings.Contains(text, "#") {
		return nil, errors.New("fragments are not allowed")
	}
	if strings.IndexFunc(text, func(r rune) bool { return r <= 0x20 || r == 0x7f }) >= 0 {
		return nil, errors.New("space or control character in the URL")
	}
	colon := strings.IndexByte(text, ':')
	scheme := ""
	if colon > 0 {
		scheme = strings.ToLower(text[:colon])
	}
	if !validScheme(scheme) {
		return nil, errors.New("missing scheme")
	}
	defaultPort, known := defaultPorts[scheme]
	if !known {
		return nil, fmt.Errorf("unsupported scheme '%s'", scheme)
	}
	rest := text[colon+1:]
	if !strings.HasPrefix(rest, "//") {
		return nil, errors.New("'//' and an authority are required")
	}
	rest = rest[2:]

	// The authority runs up to the path or the query; the userinfo ends at its last '@'.
	authority, pathAndQuery := rest, ""
	if end := strings.IndexAny(rest, "/?"); end >= 0 {
		authority, pathAndQuery = rest[:end], rest[end:]
	}
	u := &URL{Scheme: scheme, TLS: scheme == "fires" || scheme == "wss", WebSocket: scheme == "ws" || scheme == "wss"}
	hostPort := authority
	var err error
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		hostPort = authority[at+1:]
		if u.User, u.Password, err = parseUserinfo(authority[:at]); err != nil {
			return nil, err
		}
	} else {
		// "The default user and password are guest and guest."
		u.User, u.Password = "guest", "guest"
	}
	if u.Host, u.Port, err = parseHostPort(hostPort, defaultPort); err != nil {
		return nil, err
	}

	path, query := pathAndQuery, ""
	if q := strings.IndexByte(pathAndQuery, '?'); q >= 0 {
		path, query = pathAndQuery[:q], pathAndQuery[q+1:]
	}
	// "For fire and fires, the vhost is the URL path with the leading / removed and percent-decoded; an empty
	// path means vhost /. For ws and wss, the path is the WebSocket endpoint (/fire when empty) and the vhost
	// is the vhost query parameter."
	if u.WebSocket {
		u.Path = path
		if path == "" || path == "/" {
			u.Path = "/fire"
		}
		u.Vhost, err = vhostParameter(query)
	} else if path == "" || path == "/" {
		u.Vhost = "/"
	} else {
		u.Vhost, err = percentDecode(path[1:])
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// validScheme: RFC 3986's ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), in lower case here.
func validScheme(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// An absent user or password is guest; one present but empty stays "". The user ends at the first ':'.
func parseUserinfo(userinfo string) (user, password string, err error) {
	rawUser, rawPassword, hasPassword := strings.Cut(userinfo, ":")
	if user, err = percentDecode(rawUser); err != nil {
		return "", "", err
	}
	if !hasPassword {
		return user, "guest", nil
	}
	password, err = percentDecode(rawPassword)
	return user, password, err
}

// host, [IPv6] or host:port; "host:" with no digits takes the default port.
func parseHostPort(hostPort string, defaultPort int) (string, int, error) {
	var host, portText string
	if strings.HasPrefix(hostPort, "[") {
		end := strings.IndexByte(hostPort, ']')
		if end < 0 {
			return "", 0, errors.New("unterminated IPv6 literal")
		}
		host = hostPort[1:end]
		after := hostPort[end+1:]
		if after != "" && after[0] != ':' {
			return "", 0, fmt.Errorf("unexpected '%c' after the IPv6 literal", after[0])
		}
		portText = strings.TrimPrefix(after, ":")
	} else if colon := strings.LastIndexByte(hostPort, ':'); colon >= 0 {
		host, portText = hostPort[:colon], hostPort[colon+1:]
	} else {
		host = hostPort
	}
	if host == "" {
		return "", 0, errors.New("host is required")
	}
	if portText == "" {
		return host, defaultPort, nil
	}
	for _, c := range portText {
		if c < '0' || c > '9' {
			return "", 0, fmt.Errorf("port '%s' is not decimal digits", portText)
		}
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %s is outside 1..65535", portText)
	}
	return host, port, nil
}

// The first vhost query parameter, percent-decoded; "/" when absent or empty. '+' is not a space.
func vhostParameter(query string) (string, error) {
	for _, pair := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(pair, "=")
		if name != "vhost" {
			continue
		}
		if value == "" {
			return "/", nil
		}
		return percentDecode(value)
	}
	return "/", nil
}

// '%' must be followed by two hex digits, and the decoded bytes must be UTF-8.
func percentDecode(text string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] != '%' {
			out.WriteByte(text[i])
			continue
		}
		if i+2 >= len(text) || !isHex(text[i+1]) || !isHex(text[i+2]) {
			return "", fmt.Errorf("'%%' not followed by two hex digits in '%s'", text)
		}
		b, _ := strconv.ParseUint(text[i+1:i+3], 16, 8)
		out.WriteByte(byte(b))
		i += 2
	}
	if !utf8.ValidString(out.String()) {
		return "", fmt.Errorf("'%s' does not decode to UTF-8", text)
	}
	return out.String(), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
