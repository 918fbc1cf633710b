"""Pure numeric pieces with no TFF dependency, used as references by the tests."""
