"""Request/reply wire contracts shared by the services that serve and call them."""
