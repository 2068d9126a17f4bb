def parse_config(text, defaults, strict):
    values = dict(defaults)
    section = None
    errors = []
    line_number = 0
    for raw in text.splitlines():
        line_number += 1
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith(";"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            if not section:
                errors.append("line %d: empty section name" % line_number)
                section = None
            continue
        if "=" not in line:
            errors.append("line %d: expected key = value" % line_number)
            continue
        key, value = line.split("=", 1)
        key = key.strip()
        value = value.strip()
        if not key:
            errors.append("line %d: empty key" % line_number)
            continue
        if section is not None:
            key = section + "." + key
        if value.lower() in ("true", "yes", "on"):
            value = True
        elif value.lower() in ("false", "no", "off"):
            value = False
        elif value.isdigit():
            value = int(value)
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if strict and key not in defaults:
            errors.append("line %d: unknown key %s" % (line_number, key))
            continue
        if key in values and type(values[key]) is not type(value) and key in defaults:
            errors.append("line %d: %s should be %s" % (line_number, key, type(defaults[key]).__name__))
            continue
        values[key] = value
    if errors and strict:
        raise ValueError("\n".join(errors))
    return values, errors
