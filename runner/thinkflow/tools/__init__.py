"""Tools: python entry points, shell commands, HTTP requests and built-ins, behind one Toolbox."""
