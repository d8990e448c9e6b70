"""YAML loading that remembers where every key came from.

Registry errors must name the file, the line and the offending key, so the
loader keeps the source line of every mapping and of every key in it.
"""
import yaml


class RegistryError(Exception):
    """An error in the registry, located at file:line."""

    def __init__(self, path, line, message):
        self.path = path
        self.line = line
        self.message = message
        super().__init__(f"{path}:{line}: {message}")


class LDict(dict):
    """A mapping that knows its file, the line of itself and of each key (1-based)."""

    path = None
    line = 0
    key_lines = None

    def line_of(self, key):
        if self.key_lines and key in self.key_lines:
            return self.key_lines[key]
        return self.line


class LList(list):
    path = None
    line = 0
    item_lines = None

    def line_of(self, index):
        if self.item_lines and 0 <= index < len(self.item_lines):
            return self.item_lines[index]
        return self.line


def _convert(node, path):
    if isinstance(node, yaml.MappingNode):
        out = LDict()
        out.path = path
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = _convert(key_node, path)
            if not isinstance(key, str):
                raise RegistryError(path, key_node.start_mark.line + 1,
                                    f"mapping key {key!r} must be a string")
            if key in out:
                raise RegistryError(path, key_node.start_mark.line + 1,
                                    f"duplicate key '{key}' (first at line {out.key_lines[key]})")
            out[key] = _convert(value_node, path)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        out = LList(_convert(v, path) for v in node.value)
        out.path = path
        out.line = node.start_mark.line + 1
        out.item_lines = [v.start_mark.line + 1 for v in node.value]
        return out
    # Scalars: let the safe constructor resolve ints, floats, bools, strings.
    return _construct_scalar(node)


_scalar_loader = None


def _construct_scalar(node):
    global _scalar_loader
    if _scalar_loader is None:
        _scalar_loader = yaml.SafeLoader("")
    return _scalar_loader.construct_object(node, deep=True)


def load(path):
    """Load a YAML file into LDict/LList trees; syntax errors become RegistryError."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RegistryError(path, 0, f"cannot read: {e.strerror}") from None
    return loads(text, path)


def loads(text, path="<string>"):
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise RegistryError(path, line, f"YAML syntax: {getattr(e, 'problem', e)}") from None
    if node is None:
        raise RegistryError(path, 1, "empty registry")
    return _convert(node, path)
