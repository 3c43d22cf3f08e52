"""The scenario files, shipped with edgefl as the data package ``edgefl.scenarios``
(``edgefl.shipped_scenarios`` lists and finds them; pyproject.toml maps this folder)."""
