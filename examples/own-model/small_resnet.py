"""A model of one's own for edgefl: a small ResNet with BatchNorm (docs/extending.md, "Models").

Named in a scenario as model.name = "small_resnet:small_resnet", run from this folder."""

from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
        )  # fmt: skip

    def forward(self, x):
        return nn.functional.relu(x + self.body(x))


def small_resnet(input_shape, num_classes, width: int = 8, blocks: int = 2):
    stem = [nn.Conv2d(input_shape[0], width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    body = [Block(width) for _ in range(blocks)]
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, num_classes)]
    return nn.Sequential(*stem, *body, *head)
